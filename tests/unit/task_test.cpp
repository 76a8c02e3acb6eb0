// The synthetic tasks against their definitions: for every task an oracle written from the
// paper (RULER's needles and variable tracking read back from the prompt, Zoology's MQAR
// sampling as `multiquery_ar.py` defines it, flip-flop's last write, Ruoss et al.'s string
// rules) recomputes each example's answer from its input and must agree with the labels, in
// the causal and the bidirectional form; the distributions the papers specify (needle depth,
// MQAR's gap law, flip-flop's ignore rate, Zipf filler) hold; batches are pure functions of
// (seed, step, row) that ranks split like one process; exact match counts rows by hand.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "roformer/common/errors.h"
#include "roformer/data/task_batches.h"
#include "roformer/data/tasks/task_generator.h"
#include "roformer/eval/evaluate.h"

namespace task_test {

using namespace roformer;
using namespace roformer::data;
using config::TaskKind;

config::TaskConfig task_of(TaskKind kind) {
  config::TaskConfig t;
  t.name = kind;
  return t;
}

TaskExample draw(const config::TaskConfig& t, bool causal, int64_t length, uint64_t key) {
  TaskRng rng(key);
  return make_task_generator(t, causal)->make(length, rng);
}

std::vector<int64_t> labels_of(const TaskExample& ex) {
  std::vector<int64_t> out;
  for (int64_t l : ex.labels)
    if (l != kNoLabel) out.push_back(l);
  return out;
}

int64_t index_of(const std::vector<int64_t>& v, int64_t token, int64_t from = 0) {
  for (auto i = static_cast<size_t>(from); i < v.size(); ++i)
    if (v[i] == token) return static_cast<int64_t>(i);
  return -1;
}

// --- Oracles, each written from the task's definition, reading the causal form's input. ---

// RULER's haystack ids: 32 fillers after the reserved ids, then K keys, K values, '='.
struct Haystack {
  int64_t K;
  bool key(int64_t t) const { return t >= 36 && t < 36 + K; }
  bool value(int64_t t) const { return t >= 36 + K && t < 36 + 2 * K; }
  int64_t equals() const { return 36 + 2 * K; }
};

std::vector<int64_t> needle_oracle(const TaskExample& ex, const config::TaskConfig& t) {
  const Haystack h{t.symbols};
  const auto& in = ex.inputs;
  const int64_t q = index_of(in, kTaskQuery), a = index_of(in, kTaskAnswer, q);
  std::vector<std::pair<int64_t, std::vector<int64_t>>> needles;  // key, value tokens, in order
  for (int64_t p = 0; p < q; ++p) {
    if (!h.key(in[static_cast<size_t>(p)])) continue;
    std::vector<int64_t> values(in.begin() + p + 1, in.begin() + p + 1 + t.value_tokens);
    for (int64_t v : values) EXPECT_TRUE(h.value(v)) << "a needle's value token " << v;
    needles.emplace_back(in[static_cast<size_t>(p)], values);
    p += t.value_tokens;
  }
  std::vector<int64_t> answer;
  if (t.name == TaskKind::niah_multivalue) {  // the queried key's needles (decoys have other keys)
    for (const auto& n : needles)
      if (n.first == in[static_cast<size_t>(q + 1)]) answer.insert(answer.end(), n.second.begin(), n.second.end());
    EXPECT_EQ(static_cast<int64_t>(answer.size()), t.values * t.value_tokens);
    if (t.filler != config::TaskFiller::needles) {
      EXPECT_EQ(static_cast<int64_t>(needles.size()), t.values);
    }
    return answer;
  }
  for (int64_t p = q + 1; p < a; ++p) {
    int64_t found = 0;
    for (const auto& n : needles)
      if (n.first == in[static_cast<size_t>(p)]) {
        answer.insert(answer.end(), n.second.begin(), n.second.end());
        ++found;
      }
    EXPECT_EQ(found, 1) << "each queried key is in exactly one needle";
  }
  return answer;
}

std::vector<int64_t> variable_tracking_oracle(const TaskExample& ex, const config::TaskConfig& t) {
  const Haystack h{t.symbols};
  const auto& in = ex.inputs;
  const int64_t q = index_of(in, kTaskQuery);
  std::map<int64_t, int64_t> bound_from;  // source -> the name assigned from it
  for (int64_t p = 1; p + 1 < q; ++p)
    if (in[static_cast<size_t>(p)] == h.equals()) {
      EXPECT_EQ(bound_from.count(in[static_cast<size_t>(p + 1)]), 0u) << "each source is assigned once";
      bound_from[in[static_cast<size_t>(p + 1)]] = in[static_cast<size_t>(p - 1)];
    }
  std::vector<int64_t> answer;
  for (int64_t cur = in [static_cast<size_t>(q + 1)]; bound_from.count(cur); cur = bound_from[cur])
    answer.push_back(bound_from[cur]);
  return answer;
}

// Zoology's multiquery_ar: the first 2 kv tokens are (key, value) pairs with distinct keys in
// [1, V/2) and values in [V/2, V); labels sit at even offsets after them, on a re-query of a
// key, and are that key's value; every key is queried once.
std::vector<int64_t> mqar_oracle(const TaskExample& ex, const config::TaskConfig& t) {
  const int64_t V = t.symbols, kv = t.keys, base = kTaskFirstSymbol;
  std::map<int64_t, int64_t> value_of;
  for (int64_t i = 0; i < kv; ++i) {
    const int64_t k = ex.inputs[static_cast<size_t>(2 * i)] - base,
                  v = ex.inputs[static_cast<size_t>(2 * i + 1)] - base;
    EXPECT_TRUE(k >= 1 && k < V / 2) << k;
    EXPECT_TRUE(v >= V / 2 && v < V) << v;
    EXPECT_EQ(value_of.count(k), 0u) << "keys are distinct";
    value_of[k] = v;
  }
  std::vector<int64_t> answer;
  std::set<int64_t> queried;
  for (int64_t p = 0; p < ex.length(); ++p) {
    if (ex.labels[static_cast<size_t>(p)] == kNoLabel) continue;
    EXPECT_GE(p, 2 * kv);
    EXPECT_EQ((p - 2 * kv) % 2, 0);
    const int64_t k = ex.inputs[static_cast<size_t>(p)] - base;
    EXPECT_EQ(value_of.count(k), 1u);
    queried.insert(k);
    answer.push_back(base + value_of[k]);
  }
  EXPECT_EQ(static_cast<int64_t>(queried.size()), kv);
  return answer;
}

std::vector<int64_t> flip_flop_oracle(const TaskExample& ex) {
  std::vector<int64_t> answer;
  int64_t last_write = -1;
  for (int64_t p = ex.length() % 2; p + 1 < ex.length(); p += 2) {
    const int64_t op = ex.inputs[static_cast<size_t>(p)], bit = ex.inputs[static_cast<size_t>(p + 1)];
    if (op == 4) last_write = bit;              // w
    if (op == 5) answer.push_back(last_write);  // r: the latest write
  }
  return answer;
}

// Ruoss et al.'s rules on the input between the padding and the ANSWER marker.
std::vector<int64_t> algorithmic_oracle(const TaskExample& ex, TaskKind kind) {
  const auto& in = ex.inputs;
  int64_t start = 0;
  while (in[static_cast<size_t>(start)] == kTaskPad) ++start;
  const int64_t a = index_of(in, kTaskAnswer, start);
  std::vector<int64_t> s(in.begin() + start, in.begin() + a), out;
  auto bits_value = [](const std::vector<int64_t>& bits) {  // least significant first, ids 4 and 5
    int64_t v = 0;
    for (size_t i = bits.size(); i-- > 0;) v = 2 * v + (bits[i] - 4);
    return v;
  };
  switch (kind) {
    case TaskKind::copy:  // the answer's i-th symbol is the input's i-th
      for (size_t i = 0; i < s.size(); ++i) out.push_back(s[i]);
      return out;
    case TaskKind::reverse_string:  // ... the input's (n-1-i)-th
      for (size_t i = 0; i < s.size(); ++i) out.push_back(s[s.size() - 1 - i]);
      return out;
    case TaskKind::duplicate_string:  // ... the input's (i mod n)-th, for 2n symbols
      for (size_t i = 0; i < 2 * s.size(); ++i) out.push_back(s[i % s.size()]);
      return out;
    case TaskKind::odds_first:
      for (size_t i = 0; i < s.size(); ++i)
        if (i % 2 == 0) out.push_back(s[i]);
      for (size_t i = 0; i < s.size(); ++i)
        if (i % 2 == 1) out.push_back(s[i]);
      return out;
    case TaskKind::bucket_sort:
      std::sort(s.begin(), s.end());
      return s;
    case TaskKind::parity_check:
      return {4 + std::count(s.begin(), s.end(), 5) % 2};
    case TaskKind::even_pairs: {
      int64_t ab = 0;
      for (size_t i = 0; i + 1 < s.size(); ++i) ab += s[i] != s[i + 1];
      return {ab % 2 == 0 ? 5 : 4};
    }
    case TaskKind::cycle_navigation: {
      int64_t at = 0;
      for (int64_t m : s) at += m == 4 ? 1 : m == 5 ? -1 : 0;
      return {7 + ((at % 5) + 5) % 5};
    }
    case TaskKind::binary_addition: {
      const int64_t plus = index_of(s, kTaskQuery);
      const std::vector<int64_t> x(s.begin(), s.begin() + plus), y(s.begin() + plus + 1, s.end());
      EXPECT_EQ(x.size(), y.size());
      int64_t sum = bits_value(x) + bits_value(y);
      for (size_t i = 0; i <= x.size(); ++i, sum /= 2) out.push_back(4 + sum % 2);
      return out;
    }
    default:
      ADD_FAILURE() << "no oracle";
      return out;
  }
}

// Decimal addition (Kazemnejad et al.; Zhou et al.): parse both numbers in the written order,
// add them as integers, write the k + 1 digit sum in the same order. With hints, each digit's
// hint is its place: one start for a, b and the sum, the 10^j digit at start + j.
std::vector<int64_t> addition_oracle(const TaskExample& ex, const config::TaskConfig& t) {
  const auto& in = ex.inputs;
  int64_t start = 0;
  while (in[static_cast<size_t>(start)] == kTaskPad) ++start;
  const int64_t plus = index_of(in, kTaskQuery, start), mark = index_of(in, kTaskAnswer, start);
  const int64_t step = t.index_hints > 0 ? 2 : 1, first_hint = 14;
  int64_t hint0 = -1;
  // The value of the number at [from, to) and its places' hints checked against hint0.
  auto number = [&](int64_t from, int64_t to) {
    const int64_t places = (to - from) / step;
    unsigned __int128 v = 0;
    for (int64_t i = 0; i < places; ++i) {
      const int64_t j = t.reverse_digits ? i : places - 1 - i;
      const int64_t at = from + i * step;
      if (step == 2) {
        const int64_t h = in[static_cast<size_t>(at)] - first_hint - j;
        EXPECT_TRUE(hint0 < 0 || h == hint0) << "hints of one place differ";
        hint0 = h;
      }
      const int64_t d = in[static_cast<size_t>(at + step - 1)] - 4;
      EXPECT_TRUE(d >= 0 && d < 10);
      unsigned __int128 p = 1;
      for (int64_t e = 0; e < j; ++e) p *= 10;
      v += p * static_cast<unsigned __int128>(d);
    }
    return v;
  };
  const unsigned __int128 x = number(start, plus), y = number(plus + 1, mark);
  EXPECT_EQ(plus - start, mark - plus - 1) << "operands of equal length";
  const int64_t places = (plus - start) / step + 1;
  if (step == 2) {
    EXPECT_TRUE(hint0 >= 0 && hint0 + places <= t.index_hints) << "hints inside their set";
  }
  unsigned __int128 sum = x + y;
  std::vector<int64_t> units_first;
  for (int64_t j = 0; j < places; ++j, sum /= 10) units_first.push_back(static_cast<int64_t>(sum % 10));
  EXPECT_EQ(sum, 0u) << "the sum fits k + 1 digits";
  std::vector<int64_t> out;
  for (int64_t i = 0; i < places; ++i) {
    const int64_t j = t.reverse_digits ? i : places - 1 - i;
    if (step == 2) out.push_back(first_hint + hint0 + j);
    out.push_back(4 + units_first[static_cast<size_t>(j)]);
  }
  return out;
}

std::vector<int64_t> oracle(const TaskExample& ex, const config::TaskConfig& t) {
  switch (t.name) {
    case TaskKind::niah_single:
    case TaskKind::niah_multikey:
    case TaskKind::niah_multivalue:
    case TaskKind::niah_multiquery:
      return needle_oracle(ex, t);
    case TaskKind::variable_tracking:
      return variable_tracking_oracle(ex, t);
    case TaskKind::mqar:
      return mqar_oracle(ex, t);
    case TaskKind::flip_flop:
      return flip_flop_oracle(ex);
    case TaskKind::addition:
      return addition_oracle(ex, t);
    default:
      return algorithmic_oracle(ex, t.name);
  }
}

std::vector<TaskKind> all_tasks() {
  std::vector<TaskKind> out;
  for (const auto& [kind, name] : config::task_kind_names().entries)
    if (kind != TaskKind::none) out.push_back(kind);
  return out;
}

// Every task at several lengths and settings: the labels are the oracle's answer; the causal
// form keeps each answer token in the input after its label (teacher forcing), the
// bidirectional form masks it and labels it in place; both forms draw the same example.
TEST(Tasks, EveryExampleAnswersWhatItsDefinitionAsks) {
  for (TaskKind kind : all_tasks()) {
    for (int setting = 0; setting < 3; ++setting) {
      config::TaskConfig t = task_of(kind);
      if (setting == 1) {  // more keys, values, hops, longer values, a Zipf haystack
        t.keys = 6, t.queries = 3, t.values = 3, t.value_tokens = 3, t.chains = 2, t.hops = 3, t.symbols = 24;
        t.filler = config::TaskFiller::zipf, t.p_ignore = 0.3, t.reverse_digits = true, t.index_hints = 40;
      }
      if (setting == 2) {  // the needle tasks in a haystack of decoy needles
        if (kind < TaskKind::niah_single || kind > TaskKind::niah_multiquery) continue;
        t.filler = config::TaskFiller::needles;
      }
      const auto generator = make_task_generator(t, true);
      for (int64_t length : {generator->min_length(), generator->min_length() + 1, int64_t{61}, int64_t{200}}) {
        if (kind == TaskKind::binary_addition && length > 61) continue;  // the oracle's sums fit 62 bits
        if (kind == TaskKind::addition && length > 61) continue;         // ... and 38 decimal digits
        for (uint64_t key = 0; key < 40; ++key) {
          SCOPED_TRACE(config::task_kind_names().name(kind) + " setting " + std::to_string(setting) + " length " +
                       std::to_string(length) + " key " + std::to_string(key));
          const TaskExample c = draw(t, true, length, key), b = draw(t, false, length, key);
          ASSERT_EQ(c.length(), length);
          const std::vector<int64_t> answer = labels_of(c);
          ASSERT_FALSE(answer.empty());
          EXPECT_EQ(answer, oracle(c, t));
          EXPECT_EQ(labels_of(b), answer);
          for (int64_t p = 0; p < length; ++p) {
            const auto i = static_cast<size_t>(p);
            EXPECT_TRUE(c.inputs[i] >= 0 && c.inputs[i] < generator->vocab_size());
            if (kind == TaskKind::mqar) {  // labels on the query itself, the value never shown
              EXPECT_EQ(b.inputs[i], c.inputs[i]);
              EXPECT_EQ(b.labels[i], c.labels[i]);
            } else if (b.labels[i] != kNoLabel) {
              EXPECT_EQ(b.inputs[i], kTaskMask);
              EXPECT_EQ(c.inputs[i], b.labels[i]);
              EXPECT_EQ(c.labels[i - 1], b.labels[i]);
            } else {
              EXPECT_EQ(b.inputs[i], c.inputs[i]);
            }
          }
          if (::testing::Test::HasFailure()) return;
        }
      }
    }
  }
}

// RULER places a needle at a depth uniform on 0-100 %: over 4,000 haystacks every fifth of
// the depth holds a fifth of the needles, and both ends are reached.
TEST(Tasks, NeedleDepthIsUniformOverTheHaystack) {
  const config::TaskConfig t = task_of(TaskKind::niah_single);
  const int64_t length = 120, room = length - 5 - 3;  // query block 5 tokens, needle 3
  std::vector<int64_t> fifths(5, 0);
  int64_t at_start = 0, at_end = 0;
  const int n = 4000;
  for (int key = 0; key < n; ++key) {
    const TaskExample ex = draw(t, true, length, static_cast<uint64_t>(key));
    int64_t p = 0;
    while (!(ex.inputs[static_cast<size_t>(p)] >= 36 && ex.inputs[static_cast<size_t>(p)] < 36 + t.symbols)) ++p;
    const double depth = static_cast<double>(p) / static_cast<double>(room);
    ASSERT_LE(depth, 1.0);
    ++fifths[static_cast<size_t>(std::min<int64_t>(4, static_cast<int64_t>(depth * 5)))];
    at_start += p == 0;
    at_end += p == room;
  }
  const double sd = std::sqrt(0.2 * 0.8 / n);
  for (int64_t f : fifths) EXPECT_NEAR(static_cast<double>(f) / n, 0.2, 4 * sd);
  EXPECT_GT(at_start, 0);
  EXPECT_GT(at_end, 0);
}

// Zoology draws the gap g between a pair and its query with p(g) ~ a (g + 1)^(a - 1): with one
// pair the gap's law is exactly that; checked at a = 0.01 (Zoology's default) and a = 1 (uniform).
TEST(Tasks, MqarGapsFollowZoologysPowerLaw) {
  for (double a : {0.01, 1.0}) {
    config::TaskConfig t = task_of(TaskKind::mqar);
    t.keys = 1, t.gap_power = a;
    const int64_t space = 50, length = 2 + 2 * space;
    double total = 0;
    std::vector<double> p(space);
    for (int64_t g = 0; g < space; ++g) total += p[static_cast<size_t>(g)] = a * std::pow(g + 1.0, a - 1);
    const int n = 20000;
    std::vector<int64_t> count(space, 0);
    for (int key = 0; key < n; ++key) {
      const TaskExample ex = draw(t, true, length, static_cast<uint64_t>(key));
      for (int64_t q = 2; q < length; ++q)
        if (ex.labels[static_cast<size_t>(q)] != kNoLabel) ++count[static_cast<size_t>((q - 2) / 2)];
    }
    for (int64_t g : {0, 1, 9, 49}) {
      const double expect = p[static_cast<size_t>(g)] / total;
      EXPECT_NEAR(static_cast<double>(count[static_cast<size_t>(g)]) / n, expect, 4 * std::sqrt(expect / n) + 1e-4)
          << "a " << a << " gap " << g;
    }
  }
}

// No MQAR query has an earlier false occurrence of its key (the filler comes from the values'
// range), at Zoology's vocabulary and at 16 symbols, up to 2048 tokens (32 x the study's 64).
TEST(Tasks, MqarFillerNeverPosesAsAKey) {
  for (int64_t symbols : {16, 8192}) {
    config::TaskConfig t = task_of(TaskKind::mqar);
    t.symbols = symbols;
    int64_t queries = 0, false_keys = 0;
    for (int64_t length : {64, 2048}) {
      for (uint64_t key = 0; key < 50; ++key) {
        const TaskExample ex = draw(t, true, length, key);
        for (int64_t q = 2 * t.keys; q < length; ++q) {
          if (ex.labels[static_cast<size_t>(q)] == kNoLabel) continue;
          ++queries;
          for (int64_t p = 2 * t.keys; p < q; ++p)
            false_keys += ex.inputs[static_cast<size_t>(p)] == ex.inputs[static_cast<size_t>(q)];
        }
      }
    }
    EXPECT_EQ(queries, 2 * 50 * t.keys) << symbols;
    EXPECT_EQ(false_keys, 0) << symbols << " symbols";
  }
}

// Variable tracking's shortcut, the first hops + 1 assigned names in the order they appear,
// answers one chain always and two chains only when chain 0's three statements all come first:
// 1 / C(6, 3) = 5 % of the examples at the default two chains and two hops.
TEST(Tasks, VariableTrackingDefaultsDefeatCopyingNamesInOrder) {
  config::TaskConfig t = task_of(TaskKind::variable_tracking);
  EXPECT_EQ(t.chains, 2);
  const int64_t equals = kTaskFirstSymbol + 32 + 2 * t.symbols;  // the haystack's '=' (retrieval_tasks.cpp)
  auto shortcut_rate = [&](const config::TaskConfig& task) {
    const int n = 4000;
    int right = 0;
    for (int key = 0; key < n; ++key) {
      const TaskExample ex = draw(task, true, 96, static_cast<uint64_t>(key));
      std::vector<int64_t> names;
      for (int64_t p = 0; p + 1 < ex.length(); ++p)
        if (ex.inputs[static_cast<size_t>(p + 1)] == equals && names.size() < static_cast<size_t>(task.hops + 1))
          names.push_back(ex.inputs[static_cast<size_t>(p)]);
      right += names == labels_of(ex);
    }
    return static_cast<double>(right) / n;
  };
  EXPECT_NEAR(shortcut_rate(t), 0.05, 4 * std::sqrt(0.05 * 0.95 / 4000));
  config::TaskConfig one = t;
  one.chains = 1;
  EXPECT_EQ(shortcut_rate(one), 1.0);  // why one chain measures ordered copying
}

// Each task's trivial strategies, scored on an evaluation set's examples as `roformer eval`
// scores them: copying the first or last of four needles hits the asked one a quarter of the
// time; names in order answer two chains 5 % of the time and one chain always; flip-flop's
// last bit shown is right at every read when nothing is ignored, and reading 0 is right at all
// of a sequence's reads about 2^-reads of the time; MQAR's shortcuts sit at chance.
TEST(Tasks, FloorsScoreTheirStrategiesOnTheEvaluationsExamples) {
  auto floor_of = [](const config::TaskConfig& t, int64_t length, const std::string& name) {
    std::shared_ptr<const TaskGenerator> g = make_task_generator(t, true);
    const TaskEvalSet set(g, length, 4000, 64, 0, 1, 7);
    const std::vector<TaskFloor> floors = g->floors();
    const std::vector<TaskEvalSet::FloorScore> scores = set.floor_scores(floors);
    for (size_t f = 0; f < floors.size(); ++f)
      if (floors[f].name == name) return scores[f].exact_match;
    ADD_FAILURE() << "no floor named " << name;
    return -1.0;
  };
  const double tol = 4 * std::sqrt(0.25 * 0.75 / 4000);
  config::TaskConfig mk = task_of(TaskKind::niah_multikey);
  EXPECT_NEAR(floor_of(mk, 96, "first needle"), 0.25, tol);
  EXPECT_NEAR(floor_of(mk, 96, "last needle"), 0.25, tol);
  EXPECT_LT(floor_of(mk, 96, "constant value"), 0.1);
  config::TaskConfig vt = task_of(TaskKind::variable_tracking);
  EXPECT_NEAR(floor_of(vt, 96, "names in order"), 0.05, 4 * std::sqrt(0.05 * 0.95 / 4000));
  vt.chains = 1;
  EXPECT_EQ(floor_of(vt, 96, "names in order"), 1.0);
  config::TaskConfig ff = task_of(TaskKind::flip_flop);
  ff.p_ignore = 0.0;
  EXPECT_EQ(floor_of(ff, 64, "last bit shown"), 1.0);
  EXPECT_LT(floor_of(ff, 64, "always 0"), 0.01);  // about 16 reads per sequence
  ff.p_ignore = 0.8;
  EXPECT_LT(floor_of(ff, 64, "last bit shown"), 0.9);
  config::TaskConfig mq = task_of(TaskKind::mqar);
  EXPECT_LT(floor_of(mq, 64, "token before the query"), 0.01);
  EXPECT_LT(floor_of(mq, 64, "first pair's value"), 0.01);
}

// Flip-flop's floors per read (token accuracy, the paper's metric), against their closed form: a
// read after a mid-sequence instruction that is i with probability p and w or r alike otherwise
// follows a w, not an i, with probability (1-p)/2 / ((1-p)/2 + p) = (1-p)/(1+p); then the last
// bit shown is right, after an i it is right half the time (its bit is uniform). Reading 0 is
// right half the time whatever p is.
TEST(Tasks, FlipFlopFloorsPerReadMatchTheirClosedForm) {
  for (double p : {0.0, 0.8}) {
    config::TaskConfig t = task_of(TaskKind::flip_flop);
    t.p_ignore = p;
    std::shared_ptr<const TaskGenerator> g = make_task_generator(t, true);
    const TaskEvalSet set(g, 512, 4000, 64, 0, 1, 11);
    const std::vector<TaskEvalSet::FloorScore> s = set.floor_scores(g->floors());  // last bit shown, always 0
    const double after_w = (1 - p) / (1 + p);
    EXPECT_NEAR(s[0].accuracy, after_w + (1 - after_w) / 2, 0.01) << "p_ignore " << p;
    EXPECT_NEAR(s[1].accuracy, 0.5, 0.01) << "p_ignore " << p;
    EXPECT_LT(s[1].exact_match, 1e-3);  // about 26 reads per sequence, all 0 in one of 2^26
  }
}

// Flip-flop instructions after the first are i with probability p_ignore; Zipf filler tokens
// are drawn with P(i) ~ 1/(i+1), so the first is twice as common as the second.
TEST(Tasks, FlipFlopIgnoreRateAndZipfFillerFollowTheirLaws) {
  for (double p_ignore : {0.1, 0.8, 0.98}) {
    config::TaskConfig t = task_of(TaskKind::flip_flop);
    t.p_ignore = p_ignore;
    int64_t ignores = 0, total = 0;
    for (uint64_t key = 0; key < 200; ++key) {
      const TaskExample ex = draw(t, true, 200, key);
      for (int64_t p = 2; p < 198; p += 2, ++total) ignores += ex.inputs[static_cast<size_t>(p)] == 6;
    }
    const double rate = static_cast<double>(ignores) / static_cast<double>(total);
    EXPECT_NEAR(rate, p_ignore, 4 * std::sqrt(p_ignore * (1 - p_ignore) / static_cast<double>(total)) + 1e-3);
  }
  config::TaskConfig t = task_of(TaskKind::niah_single);
  t.filler = config::TaskFiller::zipf;
  double first = 0, second = 0;
  for (uint64_t key = 0; key < 300; ++key) {
    const TaskExample ex = draw(t, true, 400, key);
    first += static_cast<double>(std::count(ex.inputs.begin(), ex.inputs.end(), 4));
    second += static_cast<double>(std::count(ex.inputs.begin(), ex.inputs.end(), 5));
  }
  EXPECT_NEAR(first / second, 2.0, 0.1);
}

TEST(Tasks, DistinctDrawsAreDistinctAndCoverTheirRange) {
  TaskRng rng(7);
  std::set<int64_t> seen;
  for (int i = 0; i < 200; ++i) {
    const std::vector<int64_t> d = rng.distinct(5, 9);
    ASSERT_EQ(std::set<int64_t>(d.begin(), d.end()).size(), 5u);
    for (int64_t x : d) ASSERT_TRUE(x >= 0 && x < 9);
    seen.insert(d.begin(), d.end());
  }
  EXPECT_EQ(seen.size(), 9u);
  const std::vector<int64_t> all = rng.distinct(6, 6);
  EXPECT_EQ(std::set<int64_t>(all.begin(), all.end()).size(), 6u);
}

// A batch is a function of (seed, step, global row): two ranks of 3 rows give the rows of one
// process with 6, at one length per step drawn from [min, max]; the evaluation examples split
// over ranks the same way.
TEST(Tasks, BatchesArePureFunctionsThatRanksSplit) {
  std::shared_ptr<const TaskGenerator> g = make_task_generator(task_of(TaskKind::copy), true);
  const TaskBatcher one(g, 10, 30, 6, 0, 99), r0(g, 10, 30, 3, 0, 99), r1(g, 10, 30, 3, 1, 99);
  std::set<int64_t> lengths;
  for (int64_t step = 0; step < 60; ++step) {
    const Batch whole = one.batch(step), a = r0.batch(step), b = r1.batch(step);
    lengths.insert(whole.input_ids.size(1));
    ASSERT_TRUE(torch::equal(whole.input_ids, torch::cat({a.input_ids, b.input_ids})));
    ASSERT_TRUE(torch::equal(whole.targets, torch::cat({a.targets, b.targets})));
    ASSERT_EQ(whole.scored, a.scored + b.scored);
    ASSERT_TRUE(torch::equal(whole.input_ids, one.batch(step).input_ids));
  }
  EXPECT_EQ(*lengths.begin(), 10);
  EXPECT_EQ(*lengths.rbegin(), 30);
  EXPECT_FALSE(torch::equal(one.batch(0).input_ids, TaskBatcher(g, 10, 30, 6, 0, 98).batch(0).input_ids));
  const TaskEvalSet all(g, 40, 7, 3, 0, 1, 5), e0(g, 40, 7, 3, 0, 2, 5), e1(g, 40, 7, 3, 1, 2, 5);
  std::vector<torch::Tensor> whole, split;
  for (int64_t i = 0; i < all.num_batches(); ++i) whole.push_back(all.batch(i).input_ids);
  for (const TaskEvalSet* e : {&e0, &e1})
    for (int64_t i = 0; i < e->num_batches(); ++i) split.push_back(e->batch(i).input_ids);
  EXPECT_TRUE(torch::equal(torch::cat(whole), torch::cat(split)));
  EXPECT_EQ(torch::cat(whole).size(0), 7);
}

// Three rows by hand: row 0 all right (exact), row 1 one wrong, row 2 nothing scored.
TEST(Tasks, ExactMatchCountsRowsByHand) {
  const torch::Tensor scored = torch::tensor({1, 3, 5, 6}, torch::kLong);  // rows 0, 0, 1, 1 of length 4
  const torch::Tensor right = torch::tensor({true, true, true, false});
  const eval::ExactCounts c = eval::count_exact_rows(scored, right, 3, 4);
  EXPECT_EQ(c.sequences, 2);
  EXPECT_EQ(c.exact, 1);
}

TEST(Tasks, LengthsAndVocabulariesThatCannotHoldAnExampleAreRefused) {
  config::TaskConfig t = task_of(TaskKind::niah_multikey);
  t.keys = 4;
  const auto g = make_task_generator(t, true);
  EXPECT_EQ(g->min_length(), 4 * 3 + 2 + 1 + 2);
  EXPECT_NO_THROW(check_task_fits(*g, t, g->min_length(), 128, "data.seq_len"));
  try {
    check_task_fits(*g, t, g->min_length() - 1, 128, "data.seq_len");
    ADD_FAILURE() << "a length below the example was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("data.seq_len 16 cannot hold one niah_multikey example"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(check_task_fits(*g, t, 64, 40, "data.seq_len"), UserError);  // vocabulary 69
  t.keys = 17;                                                              // more distinct keys than symbols
  EXPECT_THROW(make_task_generator(t, true), UserError);
  config::TaskConfig vt = task_of(TaskKind::variable_tracking);
  vt.chains = 4, vt.hops = 4;  // 20 names > 16 symbols
  EXPECT_THROW(make_task_generator(vt, true), UserError);
  config::TaskConfig mq = task_of(TaskKind::mqar);
  mq.keys = 8;  // needs 18 symbols
  EXPECT_THROW(make_task_generator(mq, true), UserError);
  config::TaskConfig add = task_of(TaskKind::addition);
  add.index_hints = 12;  // 11 digits per operand at most: 2 (3 * 11 + 1) + 2 = 70 tokens
  const auto ga = make_task_generator(add, true);
  EXPECT_EQ(ga->max_length(), 75);  // 12 digits would need 76
  EXPECT_EQ(ga->vocab_size(), 14 + 12);
  EXPECT_NO_THROW(check_task_fits(*ga, add, 75, 128, "evaluation length"));
  try {
    check_task_fits(*ga, add, 76, 128, "evaluation length");
    ADD_FAILURE() << "a length past the hint set was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("raise data.task.index_hints"), std::string::npos) << e.what();
  }
}

// Zhou et al.'s hints start anywhere in their set, so that training meets every hint: over
// 3,000 examples with 5 digits per operand and 16 hints, each of the 11 starts holds 1/11
// of them, and no hint runs past the set.
TEST(Tasks, AdditionHintsStartUniformlyInTheirSet) {
  config::TaskConfig t = task_of(TaskKind::addition);
  t.index_hints = 16, t.reverse_digits = true;
  const int64_t length = 2 * (3 * 5 + 1) + 2, starts = 16 - 5;
  std::vector<int64_t> count(static_cast<size_t>(starts), 0);
  const int n = 3000;
  for (int key = 0; key < n; ++key) {
    const TaskExample ex = draw(t, true, length, static_cast<uint64_t>(key));
    const int64_t start = ex.inputs[0] - 14;
    ASSERT_TRUE(start >= 0 && start < starts) << start;  // no padding: the first token is the units' hint
    ++count[static_cast<size_t>(start)];
  }
  const double p = 1.0 / static_cast<double>(starts), sd = std::sqrt(p * (1 - p) / n);
  for (int64_t c : count) EXPECT_NEAR(static_cast<double>(c) / n, p, 4 * sd);
}

}  // namespace task_test
