// data.task.holdout against a count that does not use the hash: two-digit addition has 10^4
// problems, so a run's training stream meets a fair share of any evaluation set; with a holdout
// of 1 in 16 the two are disjoint (compared as token sequences, not by identity), evaluation
// draws only held-out examples, training none, and the overlap count the evaluation prints is
// the count of evaluation examples whose tokens training drew.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>
#include <unordered_set>
#include <vector>

#include "roformer/data/task_batches.h"
#include "roformer/data/tasks/task_generator.h"

namespace task_holdout_test {

using namespace roformer;
using namespace roformer::data;

using Tokens = std::vector<int64_t>;

// A row's tokens other than padding: the example as a reader would compare it.
Tokens unpadded(const torch::Tensor& row) {
  Tokens out;
  for (int64_t i = 0; i < row.size(0); ++i)
    if (row[i].item<int64_t>() != kTaskPad) out.push_back(row[i].item<int64_t>());
  return out;
}

struct Stream {
  std::set<Tokens> seen;
  std::set<uint64_t> identities;
};

// What `steps` steps of a TaskBatcher trained on, read from its batches.
Stream training_stream(const TaskBatcher& batcher, int64_t steps) {
  Stream s;
  for (int64_t step = 0; step < steps; ++step) {
    const Batch b = batcher.batch(step);
    for (int64_t r = 0; r < b.input_ids.size(0); ++r) s.seen.insert(unpadded(b.input_ids[r]));
    for (const uint64_t id : batcher.identities(step)) s.identities.insert(id);
  }
  return s;
}

std::vector<Tokens> evaluation(const TaskEvalSet& set) {
  std::vector<Tokens> out;
  for (int64_t i = 0; i < set.num_batches(); ++i) {
    const Batch b = set.batch(i);
    for (int64_t r = 0; r < b.input_ids.size(0); ++r) out.push_back(unpadded(b.input_ids[r]));
  }
  return out;
}

int64_t overlap(const std::vector<Tokens>& eval, const std::set<Tokens>& seen) {
  int64_t n = 0;
  for (const Tokens& t : eval) n += seen.count(t) > 0 ? 1 : 0;
  return n;
}

std::shared_ptr<const TaskGenerator> two_digit_addition() {
  config::TaskConfig t;
  t.name = config::TaskKind::addition;
  return make_task_generator(t, true);
}

TEST(TaskHoldout, WithoutItTwoDigitAdditionEvaluatesOnProblemsItTrainedOn) {
  const auto g = two_digit_addition();  // length 9 holds two digits per operand (3k + 3 tokens)
  const TaskBatcher batcher(g, 9, 9, 32, 0, 1234);
  const Stream train = training_stream(batcher, 200);
  const TaskEvalSet set(g, 9, 256, 64, 0, 1, 7);
  const int64_t shared = overlap(evaluation(set), train.seen);
  // 6400 draws cover 1 - e^(-0.64) = 47 % of the 10^4 problems: far from disjoint.
  EXPECT_GT(shared, 256 * 35 / 100);
  EXPECT_LT(shared, 256 * 60 / 100);
  std::unordered_set<uint64_t> ids(train.identities.begin(), train.identities.end());
  EXPECT_EQ(set.count_seen(ids), shared);
  EXPECT_EQ(train.identities.size(), train.seen.size());  // one identity per distinct token sequence
}

TEST(TaskHoldout, OneInSixteenKeepsEvaluationDisjointFromTraining) {
  const auto g = two_digit_addition();
  const TaskBatcher batcher(g, 9, 9, 32, 0, 1234, 16);
  const Stream train = training_stream(batcher, 200);
  const TaskEvalSet set(g, 9, 256, 64, 0, 1, 7, 16);
  const std::vector<Tokens> eval = evaluation(set);
  EXPECT_EQ(overlap(eval, train.seen), 0);
  std::unordered_set<uint64_t> ids(train.identities.begin(), train.identities.end());
  EXPECT_EQ(set.count_seen(ids), 0);
  for (const uint64_t id : train.identities) ASSERT_NE(id % 16, 0u);
  // The held-out side is about a sixteenth of the problems: 625 of 10^4, so 256 draws repeat some.
  const std::set<Tokens> distinct(eval.begin(), eval.end());
  EXPECT_GT(distinct.size(), 180u);
  EXPECT_LT(distinct.size(), 256u);
  // Without the split the same keys draw other examples: the holdout changes what is drawn.
  EXPECT_NE(evaluation(TaskEvalSet(g, 9, 256, 64, 0, 1, 7)), eval);
}

// A length whose every example lies on the training side cannot give evaluation a held-out one:
// the draw gives up after kHoldoutDraws and keeps the last, which the overlap count then shows.
TEST(TaskHoldout, ASpaceTooSmallToSplitIsCountedNotHidden) {
  config::TaskConfig t;
  t.name = config::TaskKind::parity_check;
  t.symbols = 2;
  const std::shared_ptr<const TaskGenerator> g = make_task_generator(t, true);
  const int64_t shortest = g->min_length();
  const TaskBatcher batcher(g, shortest, shortest, 8, 0, 1, 1 << 20);  // one in 2^20: no held-out example exists
  std::unordered_set<uint64_t> ids;
  for (int64_t step = 0; step < 50; ++step)
    for (const uint64_t id : batcher.identities(step)) ids.insert(id);
  const TaskEvalSet set(g, shortest, 16, 16, 0, 1, 3, 1 << 20);
  EXPECT_EQ(set.count_seen(ids), 16);
}

}  // namespace task_holdout_test
