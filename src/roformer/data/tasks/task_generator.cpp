// The task seam (see task_generator.h): the random stream, the answer's two forms and the checks
// every task shares (the table from data.task.name to its generator is task_kinds.cpp).
#include "roformer/data/tasks/task_generator.h"

#include <algorithm>

#include "roformer/common/errors.h"

namespace roformer::data {

int64_t TaskRng::below(int64_t n) {
  // 53 random bits scaled: the bias is below n / 2^53, nothing for the tasks' small n.
  return std::min(n - 1, static_cast<int64_t>(unit() * static_cast<double>(n)));
}

std::vector<int64_t> TaskRng::distinct(int64_t k, int64_t n) {
  // A partial Fisher-Yates shuffle over a sparse map: O(k) whatever n is.
  std::vector<std::pair<int64_t, int64_t>> swapped;  // position -> value where not the identity
  auto at = [&](int64_t i) {
    for (const auto& [p, v] : swapped)
      if (p == i) return v;
    return i;
  };
  auto set = [&](int64_t i, int64_t v) {
    for (auto& [p, w] : swapped)
      if (p == i) {
        w = v;
        return;
      }
    swapped.emplace_back(i, v);
  };
  std::vector<int64_t> out;
  for (int64_t i = 0; i < k; ++i) {
    const int64_t j = i + below(n - i);
    const int64_t vi = at(i), vj = at(j);
    set(j, vi);
    set(i, vj);
    out.push_back(vj);
  }
  return out;
}

std::vector<int64_t> answer_of(const TaskExample& ex) {
  std::vector<int64_t> out;
  for (int64_t l : ex.labels)
    if (l != kNoLabel) out.push_back(l);
  return out;
}

uint64_t example_identity(const TaskExample& ex) {
  uint64_t h = 0x6578616d706c65;  // "example"
  for (int64_t t : ex.inputs)
    if (t != kTaskPad) h = mix64(h ^ mix64(static_cast<uint64_t>(t)));
  return h;
}

TaskExample draw_example(const TaskGenerator& generator, int64_t length, uint64_t key, const Holdout& holdout,
                         double reach) {
  TaskRng rng(key);
  auto make = [&] { return generator.make_within(length, reach, rng); };
  TaskExample ex = make();
  if (holdout.every <= 0) return ex;
  const auto every = static_cast<uint64_t>(holdout.every);
  for (int draw = 1; draw < kHoldoutDraws && (example_identity(ex) % every == 0) != holdout.held_out; ++draw)
    ex = make();
  return ex;
}

double reach_at(int64_t step, int64_t reach_steps) {
  if (reach_steps <= 0 || step >= reach_steps) return 1.0;
  return static_cast<double>(std::max<int64_t>(step, 0)) / static_cast<double>(reach_steps);
}

void TaskGenerator::place_answer(TaskExample& ex, int64_t at, const std::vector<int64_t>& answer) const {
  for (size_t i = 0; i < answer.size(); ++i) {
    const auto t = static_cast<size_t>(at) + i;
    if (causal_) {
      ex.inputs[t] = answer[i];
      ex.labels[t - 1] = answer[i];  // t >= 1: every task puts a marker before its answer
    } else {
      ex.inputs[t] = kTaskMask;
      ex.labels[t] = answer[i];
    }
  }
}

std::vector<int64_t> size_lengths(const TaskGenerator& generator, const config::TaskConfig& task,
                                  const std::vector<int64_t>& sizes) {
  const std::string name = config::task_kind_names().name(task.name);
  if (generator.size_length(1) <= 0)
    throw UserError("eval.task_sizes and data.task.sizes count instance sizes, and " + name +
                    " has none (only the algorithmic tasks and addition: a string's symbols, an operand's digits); "
                    "use eval.lengths and data.task.min_length, which count tokens");
  std::vector<int64_t> out;
  for (const int64_t k : sizes) out.push_back(generator.size_length(k));
  return out;
}

std::vector<int64_t> length_range(int64_t min_length, int64_t max_length) {
  std::vector<int64_t> out;
  for (int64_t L = min_length > 0 ? min_length : max_length; L <= max_length; ++L) out.push_back(L);
  return out;
}

std::vector<int64_t> training_lengths(const TaskGenerator& generator, const config::TaskConfig& task, int64_t seq_len) {
  if (task.sizes.empty()) return length_range(task.min_length, seq_len);
  const std::vector<int64_t> out = size_lengths(generator, task, length_range(task.sizes[0], task.sizes[1]));
  if (out.back() > seq_len)
    throw UserError("data.task.sizes: size " + std::to_string(task.sizes[1]) + " of " +
                    config::task_kind_names().name(task.name) + " takes " + std::to_string(out.back()) +
                    " tokens, more than data.seq_len " + std::to_string(seq_len) + "; set data.seq_len to at least " +
                    std::to_string(out.back()) + " or lower the last size");
  return out;
}

void check_task_fits(const TaskGenerator& g, const config::TaskConfig& task, int64_t length, int64_t model_vocab,
                     const std::string& where) {
  const std::string name = config::task_kind_names().name(task.name);
  if (g.vocab_size() > model_vocab)
    throw UserError("data.task " + name + " uses " + std::to_string(g.vocab_size()) +
                    " token ids but model.vocab_size is " + std::to_string(model_vocab) +
                    "; set model.vocab_size >= " + std::to_string(g.vocab_size()) + " (or lower data.task.symbols)");
  if (length < g.min_length())
    throw UserError(where + " " + std::to_string(length) + " cannot hold one " + name + " example (it needs " +
                    std::to_string(g.min_length()) + " tokens with these data.task settings); use lengths >= " +
                    std::to_string(g.min_length()) + " or fewer keys, values or hops");
  if (length > g.max_length())
    throw UserError(where + " " + std::to_string(length) + " is longer than one " + name +
                    " example can be with these data.task settings (at most " + std::to_string(g.max_length()) +
                    " tokens); raise data.task.index_hints or use shorter lengths");
}

}  // namespace roformer::data
