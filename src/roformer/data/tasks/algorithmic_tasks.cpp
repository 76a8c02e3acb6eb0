// Flip-flop language modelling (Liu et al., NeurIPS 2023), the algorithmic tasks of Ruoss et
// al. (ACL 2023, after Deletang et al. 2023) and Kazemnejad et al. (NeurIPS 2023), and decimal
// addition with reversed digits and index hints (Zhou et al. 2024).
//
// An algorithmic example is [PAD..., input, ANSWER, answer]: the instance size is the largest
// whose example fits the length, the rest is padding in front, so the length axis counts tokens
// in the sequence like every other evaluation here. Binary tasks use symbols 4 (0) and 5 (1).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "roformer/common/errors.h"
#include "roformer/data/tasks/task_kinds.h"

namespace roformer::data {
namespace algorithmic {

using config::TaskConfig;
using config::TaskKind;

// Pairs (instruction, bit): w writes its bit, r must repeat the bit of the latest w, i is
// ignored. The first instruction is w, the last r (so every example is scored); the others are
// i with probability p_ignore, else w or r alike. Bits after w and i are uniform. Tokens: w 4,
// r 5, i 6, bits 7 and 8. An odd length starts with one pad.
class FlipFlopTask : public TaskGenerator {
 public:
  FlipFlopTask(const TaskConfig& t, bool causal) : TaskGenerator(causal), p_ignore_(t.p_ignore) {}
  static constexpr int64_t kW = 4, kR = 5, kI = 6, kBit0 = 7;
  int64_t vocab_size() const override { return kBit0 + 2; }
  int64_t min_length() const override { return 4; }

  // At every read: the last bit shown before it, whether written or ignored (the shortcut
  // p_ignore defeats), or always 0 (chance per read: one half).
  std::vector<TaskFloor> floors() const override {
    auto at_reads = [](const TaskExample& ex, bool last_bit) {
      std::vector<int64_t> out;
      int64_t last = kBit0;
      for (int64_t p = ex.length() % 2; p + 1 < ex.length(); p += 2) {
        if (ex.inputs[static_cast<size_t>(p)] == kR) {
          out.push_back(last_bit ? last : kBit0);
        } else {
          last = ex.inputs[static_cast<size_t>(p + 1)];
        }
      }
      return out;
    };
    return {{"last bit shown", [at_reads](const TaskExample& ex) { return at_reads(ex, true); }},
            {"always 0", [at_reads](const TaskExample& ex) { return at_reads(ex, false); }}};
  }

  TaskExample make(int64_t n, TaskRng& rng) const override {
    TaskExample ex(n);
    const int64_t pairs = n / 2, start = n % 2;
    int64_t written = 0;
    for (int64_t k = 0; k < pairs; ++k) {
      const int64_t p = start + 2 * k;
      int64_t op = kW;
      if (k == pairs - 1)
        op = kR;
      else if (k > 0)
        op = rng.coin(p_ignore_) ? kI : rng.coin(0.5) ? kW : kR;
      ex.inputs[static_cast<size_t>(p)] = op;
      if (op == kR) {
        place_answer(ex, p + 1, {kBit0 + written});
        continue;
      }
      const int64_t bit = rng.below(2);
      if (op == kW) written = bit;
      ex.inputs[static_cast<size_t>(p + 1)] = kBit0 + bit;
    }
    return ex;
  }

 private:
  double p_ignore_;
};

// The layout every string task shares: [PAD..., tokens, ANSWER, answer].
class PaddedTask : public TaskGenerator {
 protected:
  using TaskGenerator::TaskGenerator;
  // The tokens between the padding and the answer marker: all a floor may read.
  static std::vector<int64_t> question(const TaskExample& ex) {
    const auto begin = std::find_if(ex.inputs.begin(), ex.inputs.end(), [](int64_t t) { return t != kTaskPad; });
    return {begin, std::find(begin, ex.inputs.end(), kTaskAnswer)};
  }
  // The strategy that writes `symbol` at every answer token (its count is the format's).
  static TaskFloor constant(const std::string& name, int64_t symbol) {
    return {name, [symbol](const TaskExample& ex) { return std::vector<int64_t>(answer_of(ex).size(), symbol); }};
  }
  TaskExample padded(int64_t n, const std::vector<int64_t>& tokens, const std::vector<int64_t>& answer) const {
    TaskExample ex(n);
    const int64_t pad = n - static_cast<int64_t>(tokens.size() + 1 + answer.size());
    std::copy(tokens.begin(), tokens.end(), ex.inputs.begin() + pad);
    ex.inputs[static_cast<size_t>(pad) + tokens.size()] = kTaskAnswer;
    place_answer(ex, pad + static_cast<int64_t>(tokens.size()) + 1, answer);
    return ex;
  }
};

// a + b in `base`, digits least significant first (both of a's length): the sum's |a| + 1 digits.
std::vector<int64_t> add_digits(const std::vector<int64_t>& a, const std::vector<int64_t>& b, int64_t base) {
  std::vector<int64_t> sum;
  int64_t carry = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const int64_t s = a[i] + b[i] + carry;
    sum.push_back(s % base);
    carry = s / base;
  }
  sum.push_back(carry);
  return sum;
}

// One class for the string-to-string tasks: a rule maps a random input to its answer.
class AlgorithmicTask : public PaddedTask {
 public:
  AlgorithmicTask(const TaskConfig& t, bool causal) : PaddedTask(causal), kind_(t.name) {
    alphabet_ = is_binary() ? 2 : kind_ == TaskKind::cycle_navigation ? 3 : t.symbols;
  }
  int64_t vocab_size() const override {
    // cycle_navigation: moves 4..6 (+1, -1, stay), positions 7..11 on a cycle of five.
    return kind_ == TaskKind::cycle_navigation ? kTaskFirstSymbol + 8 : kTaskFirstSymbol + alphabet_;
  }
  int64_t min_length() const override { return total(1); }
  int64_t size_length(int64_t k) const override { return total(k); }

  // The first answer symbol throughout (chance for the binary tasks: one token in two), the input
  // in its own order where the answer rearranges it, the bits added without carries.
  std::vector<TaskFloor> floors() const override {
    const int64_t first = kTaskFirstSymbol + (kind_ == TaskKind::cycle_navigation ? 3 : 0);
    std::vector<TaskFloor> out{
        constant(kind_ == TaskKind::cycle_navigation ? "position 0" : "the first symbol", first)};
    if (kind_ == TaskKind::reverse_string || kind_ == TaskKind::odds_first || kind_ == TaskKind::bucket_sort)
      out.push_back({"the input in order", [](const TaskExample& ex) { return question(ex); }});
    if (kind_ == TaskKind::binary_addition)
      out.push_back({"sum without carries", [](const TaskExample& ex) {
                       const std::vector<int64_t> q = question(ex);  // a, QUERY, b: k bits each
                       const size_t k = q.size() / 2;
                       std::vector<int64_t> sum;
                       for (size_t i = 0; i < k; ++i) sum.push_back(kTaskFirstSymbol + ((q[i] ^ q[k + 1 + i]) & 1));
                       sum.push_back(kTaskFirstSymbol);
                       return sum;
                     }});
    return out;
  }

  TaskExample make(int64_t n, TaskRng& rng) const override {
    int64_t k = 1;
    while (total(k + 1) <= n) ++k;
    std::vector<int64_t> input(static_cast<size_t>(k));
    for (int64_t& s : input) s = rng.below(alphabet_);
    std::vector<int64_t> answer = solve(input), tokens;
    if (kind_ == TaskKind::binary_addition) {  // a, QUERY (+), b: both k bits, least significant first
      std::vector<int64_t> b(static_cast<size_t>(k));
      for (int64_t& s : b) s = rng.below(2);
      answer = add_digits(input, b, 2);
      tokens = symbols(input);
      tokens.push_back(kTaskQuery);
      for (int64_t s : symbols(b)) tokens.push_back(s);
    } else {
      tokens = symbols(input);
    }
    const int64_t answer_offset = kind_ == TaskKind::cycle_navigation ? 3 : 0;
    for (int64_t& s : answer) s = kTaskFirstSymbol + answer_offset + s;
    return padded(n, tokens, answer);
  }

 private:
  bool is_binary() const {
    return kind_ == TaskKind::parity_check || kind_ == TaskKind::even_pairs || kind_ == TaskKind::binary_addition;
  }
  // Tokens in an example with an instance of size k.
  int64_t total(int64_t k) const {
    switch (kind_) {
      case TaskKind::duplicate_string:
        return 3 * k + 1;
      case TaskKind::parity_check:
      case TaskKind::even_pairs:
      case TaskKind::cycle_navigation:
        return k + 2;
      case TaskKind::binary_addition:
        return 3 * k + 3;
      default:
        return 2 * k + 1;  // copy, reverse_string, odds_first, bucket_sort
    }
  }
  static std::vector<int64_t> symbols(const std::vector<int64_t>& s) {
    std::vector<int64_t> out;
    for (int64_t x : s) out.push_back(kTaskFirstSymbol + x);
    return out;
  }
  std::vector<int64_t> solve(const std::vector<int64_t>& s) const;

  TaskKind kind_;
  int64_t alphabet_ = 2;
};

// The answer of each rule, in the input's alphabet (0-based).
std::vector<int64_t> AlgorithmicTask::solve(const std::vector<int64_t>& s) const {
  std::vector<int64_t> out;
  switch (kind_) {
    case TaskKind::copy:
      return s;
    case TaskKind::reverse_string:
      return {s.rbegin(), s.rend()};
    case TaskKind::duplicate_string:
      out = s;
      out.insert(out.end(), s.begin(), s.end());
      return out;
    case TaskKind::odds_first:  // positions 1, 3, 5, ... (1-based) first, then 2, 4, ...
      for (size_t i = 0; i < s.size(); i += 2) out.push_back(s[i]);
      for (size_t i = 1; i < s.size(); i += 2) out.push_back(s[i]);
      return out;
    case TaskKind::bucket_sort:
      out = s;
      std::sort(out.begin(), out.end());
      return out;
    case TaskKind::parity_check:  // 1 when the count of 1s is odd
      return {static_cast<int64_t>(std::count(s.begin(), s.end(), 1) % 2)};
    case TaskKind::even_pairs: {  // 1 when the pairs 01 and 10 together are even in number
      int64_t changes = 0;
      for (size_t i = 1; i < s.size(); ++i) changes += s[i] != s[i - 1];
      return {changes % 2 == 0 ? 1 : 0};
    }
    case TaskKind::cycle_navigation: {  // moves 0: +1, 1: -1, 2: stay, from 0 on a cycle of 5
      int64_t at = 0;
      for (int64_t m : s) at = (at + (m == 0 ? 1 : m == 1 ? 4 : 0)) % 5;
      return {at};
    }
    default:
      return {};  // binary_addition: computed with its second operand in make()
  }
}

// Decimal addition of two k-digit numbers: [PAD..., a, QUERY (+), b, ANSWER, a + b], the sum in
// k + 1 digits (a leading 0 kept), each number as written (Kazemnejad et al.) or least
// significant digit first (reverse_digits, Zhou et al.). With index_hints H, every digit is
// preceded by the hint of its place, start + j for the 10^j digit, from an ordered set of H
// symbols; start is drawn per example from [0, H - k), so training meets every hint and the
// places of a, b and the sum share theirs. Digits are ids 4..13, hints 14 on. Leading zeros
// are allowed: every digit is uniform.
class AdditionTask : public PaddedTask {
 public:
  AdditionTask(const TaskConfig& t, bool causal)
      : PaddedTask(causal), reversed_(t.reverse_digits), hints_(t.index_hints) {}
  static constexpr int64_t kFirstHint = kTaskFirstSymbol + 10;
  int64_t vocab_size() const override { return kFirstHint + hints_; }
  int64_t min_length() const override { return total(1); }
  // k + 1 places need k + 1 hints: the longest example has k = H - 1 digits per operand.
  int64_t max_length() const override { return hints_ > 0 ? total(hints_) - 1 : TaskGenerator::max_length(); }
  int64_t size_length(int64_t k) const override { return total(k); }  // k digits per operand

  // Digit 0 throughout (hints kept right), and each place's digits added mod 10 without carries.
  std::vector<TaskFloor> floors() const override {
    // Each strategy holds its own copy of the format, so it outlives this generator.
    return {{"zeros", [self = *this](const TaskExample& ex) { return self.sum_of(ex, false); }},
            {"sum without carries", [self = *this](const TaskExample& ex) { return self.sum_of(ex, true); }}};
  }

  TaskExample make(int64_t n, TaskRng& rng) const override {
    int64_t k = 1;
    while (total(k + 1) <= n) ++k;
    std::vector<int64_t> a(static_cast<size_t>(k)), b(static_cast<size_t>(k));  // units first
    for (int64_t& d : a) d = rng.below(10);
    for (int64_t& d : b) d = rng.below(10);
    if (hints_ > 0 && k >= hints_)  // callers check lengths against max_length() first
      throw std::logic_error("addition: " + std::to_string(k) + " digits past the hint set");
    const int64_t start = hints_ > 0 ? rng.below(hints_ - k) : 0;
    std::vector<int64_t> tokens = written(a, start);
    tokens.push_back(kTaskQuery);
    for (int64_t t : written(b, start)) tokens.push_back(t);
    return padded(n, tokens, written(add_digits(a, b, 10), start));
  }

 private:
  // The answer of a floor from the question: each place's digits added mod 10 without carries
  // (or zeros), the top place 0, written with the hints the operands' places carry.
  std::vector<int64_t> sum_of(const TaskExample& ex, bool add) const {
    const std::vector<int64_t> q = question(ex);  // a, QUERY, b
    const size_t half = q.size() / 2, step = hints_ > 0 ? 2 : 1;
    const auto k = static_cast<int64_t>(half / step);
    std::vector<int64_t> digits(static_cast<size_t>(k + 1), 0);
    int64_t start = 0;
    for (int64_t i = 0; i < k; ++i) {
      const int64_t j = reversed_ ? i : k - 1 - i;  // the place written i-th
      const size_t at = static_cast<size_t>(i) * step + (step - 1);
      if (add) digits[static_cast<size_t>(j)] = (q[at] + q[half + 1 + at] - 2 * kTaskFirstSymbol) % 10;
      if (hints_ > 0 && j == 0) start = q[at - 1] - kFirstHint;
    }
    return written(digits, start);
  }
  // Tokens of an example with k digits per operand: 3k + 1 digits, each with its hint, + 2 marks.
  int64_t total(int64_t k) const { return (hints_ > 0 ? 2 : 1) * (3 * k + 1) + 2; }
  // A number's tokens (digits units first in `digits`) in the task's order, hints before digits.
  std::vector<int64_t> written(const std::vector<int64_t>& digits, int64_t start) const {
    std::vector<int64_t> out;
    const auto places = static_cast<int64_t>(digits.size());
    for (int64_t i = 0; i < places; ++i) {
      const int64_t j = reversed_ ? i : places - 1 - i;  // the place 10^j written i-th
      if (hints_ > 0) out.push_back(kFirstHint + start + j);
      out.push_back(kTaskFirstSymbol + digits[static_cast<size_t>(j)]);
    }
    return out;
  }

  bool reversed_;
  int64_t hints_;
};

}  // namespace algorithmic

std::unique_ptr<TaskGenerator> make_flip_flop_task(const config::TaskConfig& t, bool causal) {
  return std::make_unique<algorithmic::FlipFlopTask>(t, causal);
}
std::unique_ptr<TaskGenerator> make_algorithmic_task(const config::TaskConfig& t, bool causal) {
  if (t.name == config::TaskKind::addition) return std::make_unique<algorithmic::AdditionTask>(t, causal);
  return std::make_unique<algorithmic::AlgorithmicTask>(t, causal);
}

}  // namespace roformer::data
