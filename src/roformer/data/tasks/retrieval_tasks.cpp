// Retrieval tasks: RULER's needles and variable tracking over a synthetic haystack (Hsieh et
// al. 2024, section 3: words become tokens), and Zoology's multi-query associative recall
// (Arora et al. 2023, `zoology/data/multiquery_ar.py`: its sampling, in our token ids).
//
// Haystack vocabulary: the 4 reserved ids, 32 filler tokens, `symbols` keys, `symbols` values
// and '='. A needle is [key, value tokens...]; the query closes the sequence as
// [QUERY, key(s), ANSWER] followed by the answer. Items go into the haystack in their order at
// depths drawn uniformly over the free room, so a needle's depth is uniform on 0-100 %. With
// filler `needles` the room is decoy needles instead (RULER's MK-NIAH haystack of needles):
// their keys are none of the real needles', the real needles sit among them in random order.
// Under a reach below 1 (data.task.reach_steps' curriculum) the items' depths are uniform over
// the last `reach` of the free room (of the decoys), so at 0 they sit next to the query.
#include <algorithm>
#include <array>
#include <cmath>

#include "roformer/common/errors.h"
#include "roformer/data/tasks/task_kinds.h"

namespace roformer::data {
namespace retrieval {

using config::TaskConfig;
using config::TaskKind;
constexpr int64_t kFillers = 32, kPhrase = 12;  // filler vocabulary; the noise phrase's length

struct Vocab {
  int64_t symbols = 0;
  int64_t filler(int64_t i) const { return kTaskFirstSymbol + i; }
  int64_t key(int64_t i) const { return kTaskFirstSymbol + kFillers + i; }
  int64_t value(int64_t i) const { return kTaskFirstSymbol + kFillers + symbols + i; }
  int64_t equals() const { return kTaskFirstSymbol + kFillers + 2 * symbols; }
  int64_t size() const { return equals() + 1; }
};

// Zipf's law over the filler tokens: P(i) ~ 1 / (i + 1).
int64_t zipf_filler(TaskRng& rng) {
  static const std::array<double, kFillers> cdf = [] {
    std::array<double, kFillers> c{};
    double s = 0;
    for (int64_t i = 0; i < kFillers; ++i) c[static_cast<size_t>(i)] = s += 1.0 / static_cast<double>(i + 1);
    for (double& x : c) x /= s;
    return c;
  }();
  const double u = rng.unit();
  return std::min<int64_t>(kFillers - 1, std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
}

// The last `reach` of `n` places, rounded: where the items may go under a curriculum.
int64_t within(int64_t n, double reach) {
  return reach >= 1.0 ? n : std::llround(reach * static_cast<double>(n));
}

// Writes `body` tokens from position 0: the items in order at uniform depths over the last
// `reach` of the free room, filler between.
void fill_haystack(TaskExample& ex, int64_t body, const std::vector<std::vector<int64_t>>& items,
                   config::TaskFiller filler, const Vocab& v, double reach, TaskRng& rng) {
  int64_t used = 0;
  for (const auto& item : items) used += static_cast<int64_t>(item.size());
  const int64_t room = body - used, window = within(room, reach);
  std::vector<int64_t> cut(items.size());
  for (int64_t& c : cut) c = room - window + rng.below(window + 1);
  std::sort(cut.begin(), cut.end());
  int64_t p = 0, f = 0;
  auto fill_to = [&](int64_t until) {
    for (; f < until; ++f)
      ex.inputs[static_cast<size_t>(p++)] =
          v.filler(filler == config::TaskFiller::zipf ? zipf_filler(rng) : f % kPhrase);
  };
  for (size_t i = 0; i < items.size(); ++i) {
    fill_to(cut[i]);
    for (int64_t t : items[i]) ex.inputs[static_cast<size_t>(p++)] = t;
  }
  fill_to(room);
}

void need(bool ok, const std::string& what) {
  if (!ok) throw UserError("data.task: " + what);
}

// S-, MK-, MV- and MQ-NIAH.
class NeedleTask : public TaskGenerator {
 public:
  NeedleTask(const TaskConfig& t, bool causal) : TaskGenerator(causal), kind_(t.name), filler_(t.filler) {
    v_.symbols = t.symbols;
    m_ = t.value_tokens;
    const bool many_keys = kind_ == TaskKind::niah_multikey || kind_ == TaskKind::niah_multiquery;
    needles_ = many_keys ? t.keys : kind_ == TaskKind::niah_multivalue ? t.values : 1;
    keys_ = many_keys ? t.keys : 1;
    queried_ = kind_ == TaskKind::niah_multiquery ? t.queries : 1;
    answer_ = (kind_ == TaskKind::niah_multivalue ? t.values : queried_) * m_;
    need(keys_ <= t.symbols, "keys (" + std::to_string(keys_) + ") cannot be distinct among symbols (" +
                                 std::to_string(t.symbols) + "); raise data.task.symbols");
    need(filler_ != config::TaskFiller::needles || keys_ < t.symbols,
         "filler needles draws decoy keys from the symbols that are no real needle's key, and all " +
             std::to_string(t.symbols) + " are; raise data.task.symbols above data.task.keys");
  }
  int64_t vocab_size() const override { return v_.size(); }
  int64_t min_length() const override { return needles_ * (m_ + 1) + 2 + queried_ + answer_; }

  // Chance: one value repeated. Multi-key and multi-query: the values of the first needles in the
  // haystack, or of the last ones before the query, whatever keys were asked (RULER's distractors:
  // 1 / keys exact match with one key asked).
  std::vector<TaskFloor> floors() const override {
    // Each strategy holds its own copy of the task, so it outlives this generator.
    std::vector<TaskFloor> out{{"constant value", [self = *this](const TaskExample&) {
                                  return std::vector<int64_t>(static_cast<size_t>(self.answer_), self.v_.value(0));
                                }}};
    if (kind_ != TaskKind::niah_multikey && kind_ != TaskKind::niah_multiquery) return out;
    for (const bool first : {true, false})
      out.push_back({first ? "first needle" : "last needle", [self = *this, first](const TaskExample& ex) {
                       std::vector<std::vector<int64_t>> values = self.haystack_values(ex);
                       if (!first) std::reverse(values.begin(), values.end());
                       std::vector<int64_t> answer;
                       for (int64_t i = 0; i < self.queried_ && i < static_cast<int64_t>(values.size()); ++i)
                         answer.insert(answer.end(), values[static_cast<size_t>(i)].begin(),
                                       values[static_cast<size_t>(i)].end());
                       return answer;
                     }});
    return out;
  }

  TaskExample make(int64_t n, TaskRng& rng) const override { return make_within(n, 1.0, rng); }
  TaskExample make_within(int64_t n, double reach, TaskRng& rng) const override {
    TaskExample ex(n);
    const std::vector<int64_t> keys = rng.distinct(keys_, v_.symbols);
    std::vector<std::vector<int64_t>> needles(static_cast<size_t>(needles_));
    for (int64_t j = 0; j < needles_; ++j) {
      auto& nd = needles[static_cast<size_t>(j)];
      nd.push_back(v_.key(keys[static_cast<size_t>(keys_ == 1 ? 0 : j)]));
      for (int64_t i = 0; i < m_; ++i) nd.push_back(v_.value(rng.below(v_.symbols)));
    }
    std::vector<int64_t> asked;  // needle indices queried, in query order
    if (kind_ == TaskKind::niah_multiquery)
      asked = rng.distinct(queried_, keys_);
    else
      asked = {kind_ == TaskKind::niah_multikey ? rng.below(keys_) : 0};
    std::vector<int64_t> answer;
    if (kind_ != TaskKind::niah_multivalue) {
      for (int64_t a : asked) {
        const auto& nd = needles[static_cast<size_t>(a)];
        answer.insert(answer.end(), nd.begin() + 1, nd.end());
      }
    }
    std::vector<int64_t> query;  // the asked needles' keys (before decoys join and shuffle them)
    for (int64_t a : asked) query.push_back(needles[static_cast<size_t>(a)].front());
    const int64_t body = n - 2 - queried_ - answer_;
    if (filler_ == config::TaskFiller::needles) add_decoys(needles, keys, body, reach, rng);
    if (kind_ == TaskKind::niah_multivalue)  // the one key's values in their order of appearance
      for (const auto& nd : needles)
        if (nd.front() == query.front()) answer.insert(answer.end(), nd.begin() + 1, nd.end());
    // Among decoys add_decoys placed the real needles; the room left is under one needle.
    fill_haystack(ex, body, needles, filler_, v_, filler_ == config::TaskFiller::needles ? 1.0 : reach, rng);
    int64_t p = body;
    ex.inputs[static_cast<size_t>(p++)] = kTaskQuery;
    for (int64_t k : query) ex.inputs[static_cast<size_t>(p++)] = k;
    ex.inputs[static_cast<size_t>(p++)] = kTaskAnswer;
    place_answer(ex, p, answer);
    return ex;
  }

 private:
  // Fills the room `needles` leave in `body` with decoy needles whose keys are none of `real`,
  // then shuffles them all, so every real needle's depth is uniform among the decoys (among the
  // last `reach` of them, the real needles moved behind the decoys first, under a curriculum).
  void add_decoys(std::vector<std::vector<int64_t>>& needles, const std::vector<int64_t>& real, int64_t body,
                  double reach, TaskRng& rng) const {
    const auto reals = static_cast<int64_t>(needles.size());
    const int64_t used = static_cast<int64_t>(needles.size()) * (m_ + 1);
    std::vector<int64_t> others;
    for (int64_t k = 0; k < v_.symbols; ++k)
      if (std::find(real.begin(), real.end(), k) == real.end()) others.push_back(k);
    for (int64_t d = 0; d < (body - used) / (m_ + 1); ++d) {
      std::vector<int64_t> decoy{v_.key(others[static_cast<size_t>(rng.below(static_cast<int64_t>(others.size())))])};
      for (int64_t i = 0; i < m_; ++i) decoy.push_back(v_.value(rng.below(v_.symbols)));
      needles.push_back(std::move(decoy));
    }
    const auto total = static_cast<int64_t>(needles.size());
    const int64_t window = std::max(reals, within(total, reach));
    if (window < total) std::rotate(needles.begin(), needles.begin() + reals, needles.end());
    for (int64_t i = total - 1, first = total - window; i > first; --i)  // Fisher-Yates over the window
      std::swap(needles[static_cast<size_t>(i)], needles[static_cast<size_t>(first + rng.below(i - first + 1))]);
  }

  // The value tokens of each needle in the haystack, in order (a key token opens a needle).
  std::vector<std::vector<int64_t>> haystack_values(const TaskExample& ex) const {
    const int64_t body = ex.length() - 2 - queried_ - answer_;
    std::vector<std::vector<int64_t>> out;
    for (int64_t p = 0; p + m_ < body; ++p) {
      const int64_t t = ex.inputs[static_cast<size_t>(p)];
      if (t < v_.key(0) || t >= v_.value(0)) continue;
      out.emplace_back(ex.inputs.begin() + p + 1, ex.inputs.begin() + p + 1 + m_);
      p += m_;
    }
    return out;
  }

  TaskKind kind_;
  config::TaskFiller filler_;
  Vocab v_;
  int64_t m_ = 0, needles_ = 0, keys_ = 0, queried_ = 0, answer_ = 0;
};

// RULER's variable tracking: chain j binds name(j,0) = value_j, then name(j,t) = name(j,t-1)
// for t = 1..hops; the chains' statements interleave in random order (each chain in its own
// order). Query [QUERY, value of chain 0, ANSWER]; answer: chain 0's names in order.
class VariableTrackingTask : public TaskGenerator {
 public:
  VariableTrackingTask(const TaskConfig& t, bool causal)
      : TaskGenerator(causal), chains_(t.chains), hops_(t.hops), filler_(t.filler) {
    v_.symbols = t.symbols;
    need(chains_ * (hops_ + 1) <= t.symbols,
         "variable_tracking needs chains x (hops + 1) = " + std::to_string(chains_ * (hops_ + 1)) +
             " distinct names, more than symbols (" + std::to_string(t.symbols) + "); raise data.task.symbols");
    need(filler_ != config::TaskFiller::needles,
         "filler needles is the needle tasks' haystack of decoys; variable_tracking takes noise or zipf");
  }
  int64_t vocab_size() const override { return v_.size(); }
  int64_t min_length() const override { return 3 * chains_ * (hops_ + 1) + 3 + hops_ + 1; }

  // The first hops + 1 assigned names in the order they appear, whatever value was asked: it
  // answers one chain always, two chains 1 / C(2 (hops + 1), hops + 1) of the time.
  std::vector<TaskFloor> floors() const override {
    return {{"names in order", [hops = hops_, equals = v_.equals()](const TaskExample& ex) {
               std::vector<int64_t> names;
               const int64_t body = ex.length() - 3 - (hops + 1);
               for (int64_t p = 0; p + 1 < body && static_cast<int64_t>(names.size()) <= hops; ++p)
                 if (ex.inputs[static_cast<size_t>(p + 1)] == equals)
                   names.push_back(ex.inputs[static_cast<size_t>(p)]);
               return names;
             }}};
  }

  TaskExample make(int64_t n, TaskRng& rng) const override { return make_within(n, 1.0, rng); }
  TaskExample make_within(int64_t n, double reach, TaskRng& rng) const override {
    TaskExample ex(n);
    const std::vector<int64_t> names = rng.distinct(chains_ * (hops_ + 1), v_.symbols);
    const std::vector<int64_t> values = rng.distinct(chains_, v_.symbols);
    auto name = [&](int64_t j, int64_t t) { return v_.key(names[static_cast<size_t>(j * (hops_ + 1) + t)]); };
    std::vector<int64_t> order;  // chain of each statement
    for (int64_t j = 0; j < chains_; ++j) order.insert(order.end(), static_cast<size_t>(hops_ + 1), j);
    for (int64_t i = static_cast<int64_t>(order.size()) - 1; i > 0; --i)
      std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(rng.below(i + 1))]);
    std::vector<int64_t> next(static_cast<size_t>(chains_), 0);
    std::vector<std::vector<int64_t>> statements;
    for (int64_t j : order) {
      const int64_t t = next[static_cast<size_t>(j)]++;
      const int64_t source = t == 0 ? v_.value(values[static_cast<size_t>(j)]) : name(j, t - 1);
      statements.push_back({name(j, t), v_.equals(), source});
    }
    const int64_t body = n - 3 - (hops_ + 1);
    fill_haystack(ex, body, statements, filler_, v_, reach, rng);
    ex.inputs[static_cast<size_t>(body)] = kTaskQuery;
    ex.inputs[static_cast<size_t>(body + 1)] = v_.value(values[0]);
    ex.inputs[static_cast<size_t>(body + 2)] = kTaskAnswer;
    std::vector<int64_t> answer;
    for (int64_t t = 0; t <= hops_; ++t) answer.push_back(name(0, t));
    place_answer(ex, body + 3, answer);
    return ex;
  }

 private:
  int64_t chains_, hops_;
  config::TaskFiller filler_;
  Vocab v_;
};

// Zoology's MQAR with Zoology's ids shifted past the reserved tokens (id = 4 + z, z < symbols):
// keys z in [1, V/2), values in [V/2, V); `keys` distinct pairs open the sequence; key i is
// queried at position 2 kv + 2 g_i, the gaps g_i drawn without replacement from [0, space) with
// p(g) ~ a (g + 1)^(a - 1), space = (n - 2 kv) / 2; the query's label is its value (the value
// itself never follows it). Every other position is a random z from the values' range
// [V/2, V), where Zoology draws from all of [0, V): a filler token never poses as a key, so no
// query has an earlier false occurrence of its key at any length or vocabulary (with Zoology's
// draw and 16 symbols, 42 % of queries at 64 tokens had one).
class MqarTask : public TaskGenerator {
 public:
  MqarTask(const TaskConfig& t, bool causal) : TaskGenerator(causal), V_(t.symbols), kv_(t.keys), a_(t.gap_power) {
    need(kv_ <= V_ / 2 - 1 && kv_ <= V_ - V_ / 2,
         "mqar needs keys (" + std::to_string(kv_) + ") distinct keys in [1, symbols/2) and values in [symbols/2, " +
             "symbols); raise data.task.symbols to at least " + std::to_string(2 * kv_ + 2));
  }
  int64_t vocab_size() const override { return kTaskFirstSymbol + V_; }
  int64_t min_length() const override { return 4 * kv_; }

  // At each query: the first pair's value (a constant within the example), or the token just
  // before the query (a value-range filler token: chance).
  std::vector<TaskFloor> floors() const override {
    auto at_queries = [](const TaskExample& ex, const std::function<int64_t(int64_t)>& guess) {
      std::vector<int64_t> out;
      for (int64_t q = 0; q < ex.length(); ++q)
        if (ex.labels[static_cast<size_t>(q)] != kNoLabel) out.push_back(guess(q));
      return out;
    };
    return {{"first pair's value",
             [at_queries](const TaskExample& ex) { return at_queries(ex, [&](int64_t) { return ex.inputs[1]; }); }},
            {"token before the query", [at_queries](const TaskExample& ex) {
               return at_queries(ex, [&](int64_t q) { return ex.inputs[static_cast<size_t>(q - 1)]; });
             }}};
  }

  TaskExample make(int64_t n, TaskRng& rng) const override {
    TaskExample ex(n);
    const int64_t half = V_ / 2;
    std::vector<int64_t> keys = rng.distinct(kv_, half - 1), values = rng.distinct(kv_, V_ - half);
    const int64_t context = 2 * kv_, space = (n - context) / 2;
    std::vector<uint8_t> fixed(static_cast<size_t>(n), 0);
    for (int64_t i = 0; i < kv_; ++i) {
      keys[static_cast<size_t>(i)] += 1;
      values[static_cast<size_t>(i)] += half;
      set(ex, fixed, 2 * i, keys[static_cast<size_t>(i)]);
      set(ex, fixed, 2 * i + 1, values[static_cast<size_t>(i)]);
    }
    const std::vector<int64_t> gaps = draw_gaps(space, rng);
    for (int64_t i = 0; i < kv_; ++i) {
      const int64_t q = context + 2 * gaps[static_cast<size_t>(i)];
      set(ex, fixed, q, keys[static_cast<size_t>(i)]);
      ex.labels[static_cast<size_t>(q)] = kTaskFirstSymbol + values[static_cast<size_t>(i)];
    }
    for (int64_t p = 0; p < n; ++p)
      if (!fixed[static_cast<size_t>(p)])
        ex.inputs[static_cast<size_t>(p)] = kTaskFirstSymbol + half + rng.below(V_ - half);
    return ex;
  }

 private:
  static void set(TaskExample& ex, std::vector<uint8_t>& fixed, int64_t p, int64_t z) {
    ex.inputs[static_cast<size_t>(p)] = kTaskFirstSymbol + z;
    fixed[static_cast<size_t>(p)] = 1;
  }
  // kv_ gaps without replacement, each draw proportional to the remaining weights.
  std::vector<int64_t> draw_gaps(int64_t space, TaskRng& rng) const {
    std::vector<double> w(static_cast<size_t>(space));
    double total = 0;
    for (int64_t g = 0; g < space; ++g) total += w[static_cast<size_t>(g)] = a_ * std::pow(double(g + 1), a_ - 1);
    std::vector<int64_t> out;
    for (int64_t i = 0; i < kv_; ++i) {
      double u = rng.unit() * total;
      int64_t g = 0;
      for (; g < space - 1; ++g) {
        if (w[static_cast<size_t>(g)] > 0 && u < w[static_cast<size_t>(g)]) break;
        u -= w[static_cast<size_t>(g)];
      }
      while (w[static_cast<size_t>(g)] == 0) --g;  // rounding past the last remaining weight
      total -= w[static_cast<size_t>(g)];
      w[static_cast<size_t>(g)] = 0;
      out.push_back(g);
    }
    return out;
  }
  int64_t V_, kv_;
  double a_;
};

}  // namespace retrieval

std::unique_ptr<TaskGenerator> make_needle_task(const config::TaskConfig& t, bool causal) {
  return std::make_unique<retrieval::NeedleTask>(t, causal);
}
std::unique_ptr<TaskGenerator> make_variable_tracking_task(const config::TaskConfig& t, bool causal) {
  return std::make_unique<retrieval::VariableTrackingTask>(t, causal);
}
std::unique_ptr<TaskGenerator> make_mqar_task(const config::TaskConfig& t, bool causal) {
  return std::make_unique<retrieval::MqarTask>(t, causal);
}

}  // namespace roformer::data
