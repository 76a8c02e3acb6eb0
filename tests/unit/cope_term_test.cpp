// The fused CoPE term (ops/cope_term) against CoPE's formula written with LibTorch's unfused ops
// in double, as the family computed it before the fusion and still does off the CPU: values and
// the gradients of both inputs, with hidden keys (-inf and -1e30), positions past the table's end
// (the clamp) and whole-number positions (gates of exactly 1), float against double, any thread
// count. The family through the fused term is held to the authors' algorithm in
// FrontierPosition.CopeEqualsTheAuthorsAlgorithmInDouble and to finite differences in the model suites.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>

#include "roformer/model/position/cope.h"
#include "roformer/ops/cope_term/cope_term.h"

namespace cope_term_test {

using namespace roformer;

namespace {

// The unfused term: gates, positions counted from the key to the end, clamped, interpolated.
torch::Tensor unfused(const torch::Tensor& scores, const torch::Tensor& at_integers) {
  const torch::Tensor pos = model::cope_positions(scores, at_integers.size(-1));
  const torch::Tensor floor = pos.floor();
  const torch::Tensor w = pos - floor;
  const torch::Tensor low = at_integers.gather(-1, floor.to(torch::kLong));
  const torch::Tensor high = at_integers.gather(-1, pos.ceil().to(torch::kLong));
  return high * w + low * (1 - w);
}

// Causal scores [2, 3, S, S] in double: future keys hidden, some rows with gates of exactly 1.
torch::Tensor causal_scores(int64_t S, double hidden) {
  torch::Tensor s = torch::randn({2, 3, S, S}, torch::kFloat64) * 3;
  s.select(1, 2).select(1, S - 1).fill_(800.0);  // sigmoid = 1 exactly: whole-number positions
  return s.masked_fill(torch::ones({S, S}, torch::kBool).triu(1), hidden);
}

struct Result {
  torch::Tensor out, grad_scores, grad_at_integers;
};

Result run(const torch::Tensor& s0, const torch::Tensor& a0, const torch::Tensor& upstream, bool fused) {
  const torch::Tensor s = s0.detach().requires_grad_(), a = a0.detach().requires_grad_();
  const torch::Tensor out = fused ? ops::cope_term(s, a) : unfused(s, a);
  (out * upstream.to(out.scalar_type())).sum().backward();
  return {out.detach(), s.grad(), a.grad()};
}

}  // namespace

TEST(CopeTerm, EqualsTheUnfusedMathInValuesAndGradients) {
  torch::manual_seed(11);
  const int64_t S = 13;
  for (double hidden : {-std::numeric_limits<double>::infinity(), -1e30}) {
    for (int64_t npos : {int64_t{1}, int64_t{4}, int64_t{64}}) {  // 1 and 4: most positions clamped
      const torch::Tensor s = causal_scores(S, hidden);
      const torch::Tensor a = torch::randn({2, 3, S, npos}, torch::kFloat64);
      const torch::Tensor up = torch::randn({2, 3, S, S}, torch::kFloat64);
      const Result want = run(s, a, up, false), got = run(s, a, up, true);
      EXPECT_TRUE(torch::allclose(got.out, want.out, 1e-12, 1e-12)) << "npos " << npos;
      EXPECT_TRUE(torch::allclose(got.grad_scores, want.grad_scores, 1e-12, 1e-12)) << "npos " << npos;
      EXPECT_TRUE(torch::allclose(got.grad_at_integers, want.grad_at_integers, 1e-12, 1e-12)) << "npos " << npos;
      if (npos > 1) {  // one position: no gradient to the scores
        EXPECT_GT(want.grad_scores.abs().sum().item<double>(), 0.0);
      }
    }
  }
}

// The term is the table interpolated at the counted gates: with every gate 1 (scores of +800),
// key j of query i sits at position i - j + 1, clamped, so the term is that column exactly.
TEST(CopeTerm, GatesOfOneCountTheKeysFromTheKeyToTheQuery) {
  const int64_t S = 6, npos = 4;
  const torch::Tensor s =
      torch::full({1, 1, S, S}, 800.0, torch::kFloat64).masked_fill(torch::ones({S, S}, torch::kBool).triu(1), -1e30);
  const torch::Tensor a = torch::arange(S * npos, torch::kFloat64).reshape({1, 1, S, npos});
  const torch::Tensor out = ops::cope_term(s, a);
  for (int64_t i = 0; i < S; ++i)
    for (int64_t j = 0; j < S; ++j) {
      const int64_t p = j <= i ? std::min(i - j + 1, npos - 1) : 0;
      EXPECT_EQ(out[0][0][i][j].item<double>(), a[0][0][i][p].item<double>()) << i << "," << j;
    }
}

TEST(CopeTerm, FloatFollowsDoubleAtAnyThreadCount) {
  torch::manual_seed(12);
  const int64_t S = 40;
  const torch::Tensor s = causal_scores(S, -1e30), a = torch::randn({2, 3, S, 24}, torch::kFloat64);
  const torch::Tensor up = torch::randn({2, 3, S, S}, torch::kFloat64);
  const Result want = run(s, a, up, false);
  const int threads = at::get_num_threads();
  for (int t : {1, 2}) {
    at::set_num_threads(t);
    const Result got = run(s.to(torch::kFloat32), a.to(torch::kFloat32), up, true);
    EXPECT_EQ(got.out.scalar_type(), torch::kFloat32);
    EXPECT_TRUE(torch::allclose(got.out.to(torch::kFloat64), want.out, 1e-4, 1e-4)) << t;
    EXPECT_TRUE(torch::allclose(got.grad_scores.to(torch::kFloat64), want.grad_scores, 1e-4, 1e-4)) << t;
    EXPECT_TRUE(torch::allclose(got.grad_at_integers.to(torch::kFloat64), want.grad_at_integers, 1e-4, 1e-4)) << t;
  }
  at::set_num_threads(threads);
}

// A NaN score makes its row's positions NaN: the term is NaN there (as the formula's), read
// within the table, and the other rows are untouched.
TEST(CopeTerm, NanScoresGiveNanTermsInTheirRowOnly) {
  for (auto dtype : {torch::kFloat32, torch::kFloat64}) {
    torch::Tensor s = torch::zeros({2, 5}, dtype), a = torch::randn({2, 3}, dtype);
    s[0][3] = std::numeric_limits<double>::quiet_NaN();
    const torch::Tensor s_grad = s.clone().requires_grad_(), a_grad = a.clone().requires_grad_();
    const torch::Tensor out = ops::cope_term(s_grad, a_grad);
    EXPECT_TRUE(out[0].narrow(0, 0, 4).isnan().all().item<bool>()) << out;
    EXPECT_TRUE(out[1].isfinite().all().item<bool>()) << out;
    out.sum().backward();
    EXPECT_TRUE(a_grad.grad()[1].isfinite().all().item<bool>());
  }
}

TEST(CopeTerm, RefusesMismatchedShapes) {
  const torch::Tensor s = torch::zeros({2, 5, 5}), a = torch::zeros({3, 5, 4});
  EXPECT_THROW(ops::cope_term(s, a), c10::Error);
  EXPECT_THROW(ops::cope_term(s, torch::zeros({2, 5, 0})), c10::Error);
}

}  // namespace cope_term_test
