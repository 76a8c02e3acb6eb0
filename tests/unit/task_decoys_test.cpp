// data.task.filler: needles, RULER's haystack of needles, read back from the tokens: the room
// before the query is decoy needles (what is left is shorter than one needle), no decoy carries
// a real needle's key, the asked needle is found once, its place among the decoys is uniform
// (mean index near the middle over many draws), and the floors that copy the first or last
// needle fall to about one over the needles present. Variable tracking refuses the filler.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "roformer/common/errors.h"
#include "roformer/data/task_batches.h"
#include "roformer/data/tasks/task_generator.h"

namespace task_decoys_test {

using namespace roformer;
using namespace roformer::data;

// RULER's haystack ids (retrieval_tasks.cpp): 32 fillers after the reserved ids, then keys.
bool is_key(int64_t t, int64_t symbols) {
  return t >= 36 && t < 36 + symbols;
}

TEST(TaskDecoys, TheHaystackIsDecoyNeedlesAroundTheRealOnes) {
  config::TaskConfig t;
  t.name = config::TaskKind::niah_multikey;  // four real keys of sixteen
  t.filler = config::TaskFiller::needles;
  const std::shared_ptr<const TaskGenerator> g = make_task_generator(t, true);
  double index_sum = 0, needles_sum = 0;
  const int draws = 400, length = 200;
  for (uint64_t key = 0; key < draws; ++key) {
    TaskRng rng(key);
    const TaskExample ex = g->make(length, rng);
    const int64_t body = length - 2 - 1 - t.value_tokens;  // then [QUERY, key, ANSWER, value tokens]
    const int64_t asked = ex.inputs[static_cast<size_t>(body + 1)];
    ASSERT_TRUE(is_key(asked, t.symbols));
    std::vector<int64_t> keys;  // every needle's key, in order
    int64_t p = 0, covered = 0;
    for (; p < body; ++p)
      if (is_key(ex.inputs[static_cast<size_t>(p)], t.symbols)) {
        keys.push_back(ex.inputs[static_cast<size_t>(p)]);
        covered += 1 + t.value_tokens;
        p += t.value_tokens;
      }
    EXPECT_GT(covered, body - (1 + t.value_tokens));  // the room left is under one needle
    int64_t asked_at = -1, seen = 0;
    std::multiset<int64_t> counts(keys.begin(), keys.end());
    int64_t once = 0;
    for (int64_t k : std::set<int64_t>(keys.begin(), keys.end())) once += counts.count(k) == 1;
    EXPECT_GE(once, t.keys);  // the real keys, each in one needle; decoys may repeat theirs
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] == asked) asked_at = static_cast<int64_t>(i), ++seen;
    ASSERT_EQ(seen, 1);
    index_sum += static_cast<double>(asked_at) / static_cast<double>(keys.size() - 1);
    needles_sum += static_cast<double>(keys.size());
  }
  EXPECT_NEAR(index_sum / draws, 0.5, 0.05);  // uniform depth: mean 0.5, sd of the mean ~0.015
  // 195 tokens of room hold 65 three-token needles.
  EXPECT_EQ(needles_sum / draws, 65.0);
  // Copying the first or the last needle answers about one example in 65.
  const TaskEvalSet set(g, length, 400, 100, 0, 1, 9);
  for (const TaskEvalSet::FloorScore& floor : set.floor_scores(g->floors())) EXPECT_LT(floor.exact_match, 0.05);
}

TEST(TaskDecoys, VariableTrackingAndAllKeysRealAreRefused) {
  config::TaskConfig t;
  t.name = config::TaskKind::variable_tracking;
  t.filler = config::TaskFiller::needles;
  EXPECT_THROW(make_task_generator(t, true), UserError);
  t.name = config::TaskKind::niah_multikey;
  t.keys = t.symbols;  // no key left for a decoy
  EXPECT_THROW(make_task_generator(t, true), UserError);
}

}  // namespace task_decoys_test
