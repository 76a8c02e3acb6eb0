// Ruoss et al.'s length unit and the algorithmic tasks' floors: an instance size k is written at
// size_length(k) tokens with no padding (hand-counted at size 40 for each layout), a length between
// two sizes' lengths holds the smaller size padded, data.task.sizes draws every size alike at its
// own length (and the token curriculum draws exactly what it drew before), tasks without a size
// and sizes past data.seq_len are refused; each floor is scored on hand-built examples and
// outlives its generator.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "roformer/common/errors.h"
#include "roformer/data/task_batches.h"
#include "roformer/data/tasks/task_generator.h"

namespace task_sizes_test {

using namespace roformer;
using namespace roformer::data;
using config::TaskKind;

config::TaskConfig task_of(TaskKind kind, int64_t symbols = 2) {
  config::TaskConfig t;
  t.name = kind;
  t.symbols = symbols;
  return t;
}

int64_t pads(const TaskExample& ex) {
  return std::count(ex.inputs.begin(), ex.inputs.end(), kTaskPad);
}

TEST(TaskSizes, EachSizeIsItsExampleWithoutPadding) {
  const std::map<TaskKind, int64_t> at_40{{TaskKind::copy, 81},
                                          {TaskKind::reverse_string, 81},
                                          {TaskKind::duplicate_string, 121},
                                          {TaskKind::odds_first, 81},
                                          {TaskKind::bucket_sort, 81},
                                          {TaskKind::parity_check, 42},
                                          {TaskKind::even_pairs, 42},
                                          {TaskKind::cycle_navigation, 42},
                                          {TaskKind::binary_addition, 123},
                                          {TaskKind::addition, 3 * 40 + 3}};
  for (const auto& [kind, expected] : at_40)
    for (bool causal : {true, false}) {
      const auto g = make_task_generator(task_of(kind), causal);
      EXPECT_EQ(g->size_length(40), expected) << config::task_kind_names().name(kind);
      for (int64_t k = 1; k <= 12; ++k) {
        TaskRng rng(static_cast<uint64_t>(k));
        EXPECT_EQ(pads(g->make(g->size_length(k), rng)), 0) << config::task_kind_names().name(kind) << " size " << k;
        const int64_t between = g->size_length(k + 1) - 1;  // still size k, padded in front
        EXPECT_EQ(between - pads(g->make(between, rng)), g->size_length(k));
      }
    }
  config::TaskConfig hints = task_of(TaskKind::addition);
  hints.index_hints = 16;  // every digit after its hint: 2 (3k + 1) + 2
  EXPECT_EQ(make_task_generator(hints, true)->size_length(3), 22);
}

TEST(TaskSizes, TrainingDrawsEverySizeAlikeAtItsOwnLength) {
  config::TaskConfig t = task_of(TaskKind::reverse_string);
  t.sizes = {1, 40};
  const std::shared_ptr<const TaskGenerator> g = make_task_generator(t, false);
  const std::vector<int64_t> lengths = training_lengths(*g, t, 81);
  ASSERT_EQ(lengths.size(), 40u);
  for (size_t i = 0; i < lengths.size(); ++i) EXPECT_EQ(lengths[i], 2 * static_cast<int64_t>(i + 1) + 1);
  const TaskBatcher batcher(g, lengths, 4, 0, 5);
  std::map<int64_t, int> count;
  const int steps = 8000;
  for (int s = 0; s < steps; ++s) ++count[batcher.length(s)];
  ASSERT_EQ(count.size(), 40u);
  const double mean = steps / 40.0, tol = 4 * std::sqrt(mean * 39.0 / 40.0);
  for (const auto& [length, n] : count) EXPECT_NEAR(n, mean, tol) << "length " << length;
  for (int s = 0; s < 20; ++s) EXPECT_EQ((batcher.batch(s).input_ids == kTaskPad).sum().item<int64_t>(), 0);
  // The token curriculum draws what it drew before the lengths became a list.
  const TaskBatcher range(g, 10, 30, 4, 0, 5);
  std::vector<int64_t> every;
  for (int64_t L = 10; L <= 30; ++L) every.push_back(L);
  EXPECT_EQ(training_lengths(*g, task_of(TaskKind::reverse_string), 30).size(), 1u);  // min_length 0: seq_len
  const TaskBatcher listed(g, every, 4, 0, 5);
  for (int s = 0; s < 200; ++s) {
    const uint64_t h = hash_counters(5, {0x7461736b4c656e, static_cast<uint64_t>(s)});
    ASSERT_EQ(range.length(s), 10 + static_cast<int64_t>(h % 21));
    ASSERT_EQ(listed.length(s), range.length(s));
  }
}

TEST(TaskSizes, TasksWithoutSizesAndSizesPastTheLengthAreRefused) {
  const config::TaskConfig needle = task_of(TaskKind::niah_single, 16);
  try {
    size_lengths(*make_task_generator(needle, true), needle, {41});
    ADD_FAILURE() << "a needle has no instance size";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("niah_single has none"), std::string::npos) << e.what();
  }
  config::TaskConfig t = task_of(TaskKind::reverse_string);
  t.sizes = {1, 40};
  try {
    training_lengths(*make_task_generator(t, true), t, 80);
    ADD_FAILURE() << "size 40 takes 81 tokens";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("set data.seq_len to at least 81"), std::string::npos) << e.what();
  }
}

// A causal example from its question and answer symbols (ids as the task writes them).
TaskExample example(const std::vector<int64_t>& question, const std::vector<int64_t>& answer) {
  TaskExample ex(static_cast<int64_t>(question.size() + 1 + answer.size()));
  std::copy(question.begin(), question.end(), ex.inputs.begin());
  ex.inputs[question.size()] = kTaskAnswer;
  for (size_t i = 0; i < answer.size(); ++i) {
    ex.inputs[question.size() + 1 + i] = answer[i];
    ex.labels[question.size() + i] = answer[i];
  }
  return ex;
}

std::map<std::string, std::vector<int64_t>> floor_answers(const config::TaskConfig& t, const TaskExample& ex) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const TaskFloor& f : make_task_generator(t, true)->floors()) out[f.name] = f.answer(ex);
  return out;
}

TEST(TaskSizes, AlgorithmicFloorsAnswerHandBuiltExamples) {
  const int64_t b0 = 4, b1 = 5, q = kTaskQuery;
  // Reverse 0 0 1 -> 1 0 0: the first symbol throughout, the input as it stands.
  auto r = floor_answers(task_of(TaskKind::reverse_string), example({b0, b0, b1}, {b1, b0, b0}));
  EXPECT_EQ(r["the first symbol"], (std::vector<int64_t>{b0, b0, b0}));
  EXPECT_EQ(r["the input in order"], (std::vector<int64_t>{b0, b0, b1}));
  // 3 + 1 least significant bit first (1 1 + 1 0 = 0 0 1): without carries 0 1 0.
  r = floor_answers(task_of(TaskKind::binary_addition), example({b1, b1, q, b1, b0}, {b0, b0, b1}));
  EXPECT_EQ(r["sum without carries"], (std::vector<int64_t>{b0, b1, b0}));
  // Cycle navigation's constant answer is position 0 (id 7).
  r = floor_answers(task_of(TaskKind::cycle_navigation), example({4, 4, 6}, {9}));
  EXPECT_EQ(r["position 0"], (std::vector<int64_t>{7}));
  // 57 + 45 = 102, digits reversed: 7 5 + 5 4 -> 2 0 1; without carries 2 9 0.
  auto d = [](int64_t digit) { return kTaskFirstSymbol + digit; };
  config::TaskConfig add = task_of(TaskKind::addition);
  add.reverse_digits = true;
  r = floor_answers(add, example({d(7), d(5), q, d(5), d(4)}, {d(2), d(0), d(1)}));
  EXPECT_EQ(r["sum without carries"], (std::vector<int64_t>{d(2), d(9), d(0)}));
  EXPECT_EQ(r["zeros"], (std::vector<int64_t>{d(0), d(0), d(0)}));
  // As written with hints from 2 (ids 14 + hint): 5 7 + 4 5 -> 1 0 2, without carries 0 9 2.
  add.reverse_digits = false;
  add.index_hints = 8;
  auto h = [](int64_t hint) { return kTaskFirstSymbol + 10 + hint; };
  r = floor_answers(add,
                    example({h(3), d(5), h(2), d(7), q, h(3), d(4), h(2), d(5)}, {h(4), d(1), h(3), d(0), h(2), d(2)}));
  EXPECT_EQ(r["sum without carries"], (std::vector<int64_t>{h(4), d(0), h(3), d(9), h(2), d(2)}));
}

// A floor is a value of its own: it answers after the generator that made it is gone (ASan in
// scripts/test.sh reads freed memory otherwise), as a caller that keeps only floors() expects.
TEST(TaskSizes, FloorsOutliveTheirGenerator) {
  config::TaskConfig add = task_of(TaskKind::addition);
  add.reverse_digits = true;
  for (const config::TaskConfig& t : {task_of(TaskKind::niah_multikey, 16), task_of(TaskKind::variable_tracking, 16),
                                      add, task_of(TaskKind::reverse_string)}) {
    std::vector<TaskFloor> floors;
    TaskExample ex(0);
    {
      const auto g = make_task_generator(t, true);
      floors = g->floors();
      TaskRng rng(9);
      ex = g->make(g->min_length() + 40, rng);
    }
    for (const TaskFloor& f : floors) EXPECT_EQ(f.answer(ex).size(), answer_of(ex).size()) << f.name;
  }
}

// On the evaluation's own examples: a binary answer's first symbol is right on half its tokens.
TEST(TaskSizes, ConstantAnswersScoreChanceOnBinaryStrings) {
  const std::shared_ptr<const TaskGenerator> g = make_task_generator(task_of(TaskKind::reverse_string), true);
  const TaskEvalSet set(g, g->size_length(41), 2000, 64, 0, 1, 3);
  const std::vector<TaskEvalSet::FloorScore> s = set.floor_scores(g->floors());
  EXPECT_NEAR(s[0].accuracy, 0.5, 0.01);
  EXPECT_NEAR(s[1].accuracy, 0.5, 0.01);  // a random string against its reverse
  EXPECT_EQ(s[0].exact_match, 0.0);
}

}  // namespace task_sizes_test
