// data.task.reach_steps, the curriculum on needle distance, read back from the tokens: under a
// reach r the needles' (statements') depths are uniform over the last r of the free room, next to
// the query at r = 0; among decoys the real needles are the last ones; the schedule grows r
// linearly and a batcher's stream equals the plain stream once the curriculum is over; at reach
// 1 the retrieval tasks draw exactly the examples they drew before the curriculum existed
// (hashes pinned from the generators of the commit before it), so earlier results stand.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "roformer/data/counter_rng.h"
#include "roformer/data/task_batches.h"
#include "roformer/data/tasks/task_generator.h"

namespace task_reach_test {

using namespace roformer;
using namespace roformer::data;
using config::TaskFiller;
using config::TaskKind;

// RULER's haystack ids (retrieval_tasks.cpp): 32 fillers after the reserved ids, then keys.
bool is_key(int64_t t, int64_t symbols) {
  return t >= 36 && t < 36 + symbols;
}

config::TaskConfig task_of(TaskKind kind, TaskFiller filler = TaskFiller::noise) {
  config::TaskConfig t;
  t.name = kind;
  t.filler = filler;
  return t;
}

TaskExample within(const TaskGenerator& g, int64_t length, double reach, uint64_t key) {
  TaskRng rng(key);
  return g.make_within(length, reach, rng);
}

TEST(TaskReach, NeedleDepthIsUniformOverTheLastReachOfTheRoom) {
  const config::TaskConfig t = task_of(TaskKind::niah_single);
  const auto g = make_task_generator(t, true);
  const int64_t length = 120, room = length - 5 - 3;  // query block 5 tokens, needle 3: 112
  for (const double reach : {0.0, 0.25, 0.5}) {
    const int64_t first = room - static_cast<int64_t>(std::llround(reach * room));  // 112, 84, 56
    std::set<int64_t> depths;
    double sum = 0;
    const int n = 3000;
    for (int key = 0; key < n; ++key) {
      const TaskExample ex = within(*g, length, reach, static_cast<uint64_t>(key));
      int64_t p = 0;
      while (!is_key(ex.inputs[static_cast<size_t>(p)], t.symbols)) ++p;
      depths.insert(p);
      sum += static_cast<double>(p);
    }
    EXPECT_EQ(*depths.begin(), first) << reach;
    EXPECT_EQ(*depths.rbegin(), room) << reach;
    EXPECT_EQ(static_cast<int64_t>(depths.size()), room - first + 1) << reach;  // every depth of the window
    EXPECT_NEAR(sum / n, (first + room) / 2.0, 1.0) << reach;                   // uniform: mean mid-window
  }
}

TEST(TaskReach, AtZeroTheItemsCloseTheHaystack) {
  // Four needles (key, two values): the haystack's last 12 tokens; variable tracking's two chains
  // of three statements (name = source): its last 18.
  const config::TaskConfig mk = task_of(TaskKind::niah_multikey), vt = task_of(TaskKind::variable_tracking);
  const auto needles = make_task_generator(mk, true), statements = make_task_generator(vt, true);
  const int64_t length = 200;
  for (uint64_t key = 0; key < 50; ++key) {
    const TaskExample a = within(*needles, length, 0.0, key);
    const int64_t body = length - 5;
    for (int64_t i = 0; i < 4; ++i) EXPECT_TRUE(is_key(a.inputs[static_cast<size_t>(body - 12 + 3 * i)], mk.symbols));
    for (int64_t p = 0; p < body - 12; ++p) EXPECT_LT(a.inputs[static_cast<size_t>(p)], 36) << p;  // filler only
    const TaskExample b = within(*statements, length, 0.0, key);
    const int64_t vt_body = length - 3 - 3, equals = 36 + 2 * vt.symbols;
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(b.inputs[static_cast<size_t>(vt_body - 18 + 3 * i + 1)], equals);
    for (int64_t p = 0; p < vt_body - 18; ++p) EXPECT_LT(b.inputs[static_cast<size_t>(p)], 36) << p;
  }
}

TEST(TaskReach, AmongDecoysTheRealNeedlesAreTheLastOnes) {
  const config::TaskConfig t = task_of(TaskKind::niah_multikey, TaskFiller::needles);
  const auto g = make_task_generator(t, true);
  const int64_t length = 200, body = length - 5;  // 65 needles: 4 real, 61 decoys
  for (const double reach : {0.0, 0.5}) {
    const int64_t window = std::max<int64_t>(4, std::llround(reach * 65));
    double index_sum = 0;
    const int n = 400;
    for (uint64_t key = 0; key < n; ++key) {
      const TaskExample ex = within(*g, length, reach, key);
      const int64_t asked = ex.inputs[static_cast<size_t>(body + 1)];
      std::vector<int64_t> keys;
      for (int64_t p = 0; p < body; ++p)
        if (is_key(ex.inputs[static_cast<size_t>(p)], t.symbols))
          keys.push_back(ex.inputs[static_cast<size_t>(p)]), p += 2;
      ASSERT_EQ(keys.size(), 65u);
      const auto at = std::find(keys.begin(), keys.end(), asked) - keys.begin();
      ASSERT_EQ(std::count(keys.begin(), keys.end(), asked), 1);
      EXPECT_GE(at, 65 - window) << reach;
      index_sum += static_cast<double>(at);
    }
    EXPECT_NEAR(index_sum / n, 65 - (window + 1) / 2.0, 0.1 * window + 0.5) << reach;  // uniform over the window
  }
}

TEST(TaskReach, TheScheduleGrowsLinearlyAndThenTheStreamIsThePlainOne) {
  EXPECT_EQ(reach_at(0, 100), 0.0);
  EXPECT_EQ(reach_at(25, 100), 0.25);
  EXPECT_EQ(reach_at(100, 100), 1.0);
  EXPECT_EQ(reach_at(5000, 100), 1.0);
  EXPECT_EQ(reach_at(0, 0), 1.0);
  const std::shared_ptr<const TaskGenerator> g = make_task_generator(task_of(TaskKind::niah_multikey), true);
  const TaskBatcher plain(g, 40, 96, 8, 0, 7, 16);
  TaskBatcher curriculum(g, 40, 96, 8, 0, 7, 16);
  curriculum.grow_reach_over(10);
  for (int64_t step : {10, 11, 500}) {
    EXPECT_TRUE(torch::equal(plain.batch(step).input_ids, curriculum.batch(step).input_ids)) << step;
    EXPECT_EQ(plain.identities(step), curriculum.identities(step));
  }
  const Batch early = curriculum.batch(0);
  EXPECT_FALSE(torch::equal(plain.batch(0).input_ids, early.input_ids));
  EXPECT_EQ(curriculum.length(0), plain.length(0));
  std::vector<uint64_t> ids;
  for (int64_t r = 0; r < early.input_ids.size(0); ++r) {
    const auto row = early.input_ids[r];
    ids.push_back(example_identity([&] {
      TaskExample ex(row.size(0));
      for (int64_t p = 0; p < row.size(0); ++p) ex.inputs[static_cast<size_t>(p)] = row[p].item<int64_t>();
      return ex;
    }()));
  }
  EXPECT_EQ(curriculum.identities(0), ids);  // what eval counts as trained on is what was trained on
}

TEST(TaskReach, AtReachOneTheExamplesAreThoseDrawnBeforeTheCurriculum) {
  struct Case {
    TaskKind kind;
    TaskFiller filler;
    uint64_t hash;  // of 100 examples' identities and labels, from the generators before reach existed
  };
  const Case cases[] = {{TaskKind::niah_single, TaskFiller::noise, 0xbebb117264536826ULL},
                        {TaskKind::niah_multikey, TaskFiller::noise, 0x67ba89440b530555ULL},
                        {TaskKind::niah_multikey, TaskFiller::zipf, 0x0957a4f805c69db3ULL},
                        {TaskKind::niah_multikey, TaskFiller::needles, 0x7a7625ea16fd5b65ULL},
                        {TaskKind::niah_multiquery, TaskFiller::noise, 0x9489e6f74d006eb7ULL},
                        {TaskKind::niah_multivalue, TaskFiller::needles, 0xe4d90fcb73ec1d38ULL},
                        {TaskKind::variable_tracking, TaskFiller::noise, 0xd08845c64a2820efULL}};
  for (const Case& c : cases) {
    const auto g = make_task_generator(task_of(c.kind, c.filler), true);
    uint64_t h = 0;
    for (int64_t length : {64, 257})
      for (uint64_t key = 0; key < 50; ++key) {
        const TaskExample ex = draw_example(*g, length, key, Holdout{}, 1.0);
        h = mix64(h ^ example_identity(ex));
        for (int64_t l : ex.labels) h = mix64(h ^ static_cast<uint64_t>(l + 1000));
      }
    EXPECT_EQ(h, c.hash) << config::task_kind_names().name(c.kind);
  }
}

}  // namespace task_reach_test
