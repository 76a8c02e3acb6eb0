// The seam of the synthetic length-generalisation tasks: one generator per task draws one
// example of a given total length from a counter-based random stream, so an example is a pure
// function of (seed, step, row) and a resumed or data-parallel run sees the same examples.
//
// An example is `inputs` and `labels` of equal length; labels[t] is what the model's output at
// position t must predict (-100: nothing). Causal models predict the next token, so an answer
// token at t is labelled at t-1 and stays in the input (teacher forcing); bidirectional models
// (Ruoss et al.'s encoder) see [MASK] in the answer's place and are labelled at t. Tokens 0-3
// are reserved by every task (pad, mask, query, answer marker); the task's own symbols follow.
// Torch-free.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "roformer/config/config.h"
#include "roformer/data/counter_rng.h"

namespace roformer::data {

constexpr int64_t kTaskPad = 0, kTaskMask = 1, kTaskQuery = 2, kTaskAnswer = 3, kTaskFirstSymbol = 4;
constexpr int64_t kNoLabel = -100;

struct TaskExample {
  std::vector<int64_t> inputs;
  std::vector<int64_t> labels;  // -100 where nothing is scored
  explicit TaskExample(int64_t length)
      : inputs(static_cast<size_t>(length), kTaskPad), labels(static_cast<size_t>(length), kNoLabel) {}
  int64_t length() const { return static_cast<int64_t>(inputs.size()); }
};

// A stream of random numbers from one key (a SplitMix64 counter).
class TaskRng {
 public:
  explicit TaskRng(uint64_t key) : key_(key) {}
  uint64_t next() { return mix64(key_ ^ mix64(++counter_)); }
  int64_t below(int64_t n);  // uniform in [0, n), n > 0
  double unit() { return to_unit(next()); }
  bool coin(double p) { return unit() < p; }
  // k distinct values of [0, n), in random order (k <= n).
  std::vector<int64_t> distinct(int64_t k, int64_t n);

 private:
  uint64_t key_, counter_ = 0;
};

// A trivial strategy a task's numbers are read against (chance, or a shortcut that ignores what
// the task asks for): the answer it gives to an example, read only from the tokens before the
// answer. Its exact match on the evaluation's own examples is the task's floor there.
struct TaskFloor {
  std::string name;
  std::function<std::vector<int64_t>(const TaskExample&)> answer;
};

// The answer tokens of an example, in order (its labels).
std::vector<int64_t> answer_of(const TaskExample& ex);

class TaskGenerator {
 public:
  explicit TaskGenerator(bool causal) : causal_(causal) {}
  virtual ~TaskGenerator() = default;
  virtual int64_t vocab_size() const = 0;
  // The shortest length that holds one example; lengths below it are refused.
  virtual int64_t min_length() const = 0;
  // The longest length the settings can write an example of (addition's index hints bound it).
  virtual int64_t max_length() const { return std::numeric_limits<int64_t>::max(); }
  virtual TaskExample make(int64_t length, TaskRng& rng) const = 0;
  // An example whose items (needles, statements) lie in the last `reach` (in [0, 1]) of the
  // haystack, next to the query at 0 (data.task.reach_steps' curriculum on needle distance, which
  // config validation allows for the needle tasks and variable tracking); at 1, and for every
  // other task, make's example, drawn from the same numbers.
  virtual TaskExample make_within(int64_t length, double /*reach*/, TaskRng& rng) const { return make(length, rng); }
  // The tokens of an example of instance size k (Ruoss et al.'s length: the input string's
  // symbols, an addition's digits per operand), with no padding; 0 for a task without one.
  virtual int64_t size_length(int64_t /*k*/) const { return 0; }
  // The task's trivial strategies (none where no shortcut or chance level is worth stating).
  virtual std::vector<TaskFloor> floors() const { return {}; }
  bool causal() const { return causal_; }

 protected:
  // Writes `answer` at [at, at + answer.size()) with its labels (causal or bidirectional form).
  void place_answer(TaskExample& ex, int64_t at, const std::vector<int64_t>& answer) const;

 private:
  bool causal_;
};

// data.task.holdout: one example in `every` (by its identity) is kept for evaluation, so training
// never draws it and evaluation draws only such examples; every = 0 keeps no side.
struct Holdout {
  int64_t every = 0;
  bool held_out = false;  // the side a draw must fall on: evaluation (true) or training
};

// An example's identity: a hash of its tokens other than padding, so one problem written at two
// lengths is one example. Evaluation's overlap with training is counted by it.
uint64_t example_identity(const TaskExample& ex);

// One example from the stream `key` (its items within `reach` of the query, make_within), redrawn
// from the same stream until it falls on the holdout's side (at most kHoldoutDraws draws; a length
// with too few distinct examples keeps the last, and the overlap the evaluation counts says so).
constexpr int kHoldoutDraws = 256;
TaskExample draw_example(const TaskGenerator& generator, int64_t length, uint64_t key, const Holdout& holdout,
                         double reach = 1.0);

// The reach of training step `step` under data.task.reach_steps: growing linearly from 0 (the
// items next to the query) to 1 (the whole haystack) over `reach_steps` steps; 1 when it is 0.
double reach_at(int64_t step, int64_t reach_steps);

// Every length of [min_length, max_length] (min_length 0: max_length alone), the token curriculum.
std::vector<int64_t> length_range(int64_t min_length, int64_t max_length);

// The training lengths a batcher draws from uniformly: each instance size of data.task.sizes
// at its own length (Ruoss et al.'s curriculum), else every length of [min_length, seq_len].
// Throws UserError naming data.task.sizes when the task has no instance size or the last size
// does not fit data.seq_len.
std::vector<int64_t> training_lengths(const TaskGenerator& generator, const config::TaskConfig& task, int64_t seq_len);

// The token length of each instance size in `sizes`, or a UserError naming eval.task_sizes and
// data.task.sizes when the task has no instance size.
std::vector<int64_t> size_lengths(const TaskGenerator& generator, const config::TaskConfig& task,
                                  const std::vector<int64_t>& sizes);

// The generator of data.task (name != none) for a causal or a bidirectional model.
std::unique_ptr<TaskGenerator> make_task_generator(const config::TaskConfig& task, bool causal);

// Throws UserError naming data.task when `length` cannot hold an example, is past what the
// task's settings can write, or the model's vocabulary is smaller than the task's.
void check_task_fits(const TaskGenerator& generator, const config::TaskConfig& task, int64_t length,
                     int64_t model_vocab, const std::string& where);

}  // namespace roformer::data
