// CoPE's causal table products (ops/cope_term/cope_table.h) against q e written with LibTorch's
// matmul in double: the values where a block's rows are formed and zeros beyond, the gradients of
// q and e for an upstream gradient over every entry, at lengths around the block's 128 rows and
// tables shorter and longer than the sequence; and the fact the shortcut rests on: a causal
// row's count (model::cope_positions, gates of exactly 1 at the worst) never passes its index + 1.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "roformer/model/position/cope.h"
#include "roformer/ops/cope_term/cope_table.h"

namespace cope_table_test {

using namespace roformer;

namespace {

// [S, P]: true where row i's block forms entry p (p <= the block's last row + 1, p < P).
torch::Tensor formed(int64_t S, int64_t P) {
  const int64_t rows = ops::kCausalTableBlockRows;
  torch::Tensor mask = torch::zeros({S, P}, torch::kBool);
  for (int64_t i = 0; i < S; ++i) {
    const int64_t last = std::min((i / rows + 1) * rows, S) - 1;
    mask[i].narrow(0, 0, std::min(last + 2, P)).fill_(true);
  }
  return mask;
}

}  // namespace

// Head sizes 8 (the CPU kernels, cope_table_cpu.cpp) and 6 (not a whole 32 bytes: the batched
// GEMMs), in double at 1e-12; float with 64 columns per block beyond whole vectors as well.
TEST(CopeTable, EqualsTheProductWhereFormedAndZeroBeyondInValuesAndGradients) {
  torch::manual_seed(5);
  for (const auto& [dtype, D] :
       {std::pair{torch::kFloat64, 8}, std::pair{torch::kFloat64, 6}, std::pair{torch::kFloat32, 32}})
    for (int64_t S : {int64_t{1}, int64_t{47}, int64_t{128}, int64_t{129}, int64_t{300}}) {
      for (int64_t P : {int64_t{1}, int64_t{50}, int64_t{300}, int64_t{1000}}) {
        SCOPED_TRACE("S " + std::to_string(S) + ", P " + std::to_string(P) + ", D " + std::to_string(D));
        const double tolerance = dtype == torch::kFloat64 ? 1e-11 : 1e-4;
        const torch::Tensor q0 = torch::randn({2, 3, S, D}, torch::kFloat64);
        const torch::Tensor e0 = torch::randn({D, P}, torch::kFloat64);
        const torch::Tensor upstream = torch::randn({2, 3, S, P}, torch::kFloat64);
        const torch::Tensor q = q0.to(dtype).clone().requires_grad_(), e = e0.to(dtype).clone().requires_grad_();
        const torch::Tensor rq = q0.clone().requires_grad_(), re = e0.clone().requires_grad_();
        const torch::Tensor got = ops::causal_table_products(q, e);
        const torch::Tensor want = torch::matmul(rq, re) * formed(S, P).to(torch::kFloat64);
        (got * upstream.to(dtype)).sum().backward();
        (want * upstream).sum().backward();
        EXPECT_TRUE(torch::allclose(got.to(torch::kFloat64), want, 0, tolerance));
        EXPECT_EQ(got.masked_select(formed(S, P).logical_not()).abs().sum().item<double>(), 0.0);
        EXPECT_TRUE(torch::allclose(q.grad().to(torch::kFloat64), rq.grad(), 0, tolerance * std::sqrt(double(P))));
        EXPECT_TRUE(torch::allclose(e.grad().to(torch::kFloat64), re.grad(), 0, tolerance * std::sqrt(double(S * 6))));
      }
    }
}

// With each row's gate total given (as CoPE's tile forward writes it), the backward's products
// stop past entry floor(total) + 2 of each block's rows: the gradients equal the whole products'
// for an upstream gradient that is zero past each row's floor(total) + 1 (what the tile term
// writes), and they differ when it is not (the products did stop); totals not written (NaN) or
// beyond the table leave the products whole.
TEST(CopeTable, RowTotalsBoundTheBackwardsProductsExactly) {
  torch::manual_seed(6);
  const int64_t S = 300, P = 300;
  const torch::Tensor q0 = torch::randn({2, 3, S, 8}, torch::kFloat64), e0 = torch::randn({8, P}, torch::kFloat64);
  const torch::Tensor totals =
      torch::rand({2, 3, S}, torch::kFloat64) * torch::arange(1, S + 1).to(torch::kFloat64) * 0.4;
  const torch::Tensor beyond =
      torch::arange(P).view({1, 1, 1, P}).to(torch::kFloat64) > totals.floor().unsqueeze(-1) + 1;
  auto gradients = [&](const torch::Tensor& hint, const torch::Tensor& upstream) {
    const torch::Tensor q = q0.clone().requires_grad_(), e = e0.clone().requires_grad_();
    (ops::causal_table_products(q, e, hint) * upstream).sum().backward();
    return std::make_pair(q.grad(), e.grad());
  };
  const torch::Tensor upstream = torch::randn({2, 3, S, P}, torch::kFloat64);
  const torch::Tensor bounded = upstream.masked_fill(beyond, 0.0);
  const auto whole = gradients({}, bounded), hinted = gradients(totals, bounded);
  EXPECT_TRUE(torch::allclose(hinted.first, whole.first, 0, 1e-12));
  EXPECT_TRUE(torch::allclose(hinted.second, whole.second, 0, 1e-12));
  const auto stopped = gradients(totals, upstream), full = gradients({}, upstream);
  EXPECT_GT((stopped.first - full.first).abs().max().item<double>(), 1e-3);
  for (const torch::Tensor& unknown : {torch::full_like(totals, NAN), totals + 1e6}) {
    const auto kept = gradients(unknown, upstream);
    EXPECT_TRUE(torch::allclose(kept.first, full.first, 0, 1e-12));
    EXPECT_TRUE(torch::allclose(kept.second, full.second, 0, 1e-12));
  }
}

TEST(CopeTable, ACausalRowNeverCountsPastItsIndexPlusOne) {
  const int64_t S = 300;
  // Gates of exactly 1 on every visible key (the largest counts), the future hidden.
  const torch::Tensor hidden = torch::ones({S, S}, torch::kBool).triu(1);
  for (double score : {800.0, 3.0}) {
    const torch::Tensor scores = torch::full({1, 1, S, S}, score, torch::kFloat32).masked_fill(hidden, -1e30);
    const torch::Tensor counts = model::cope_positions(scores, /*max_positions=*/4 * S).ceil()[0][0];
    const torch::Tensor reach = torch::arange(S, torch::kFloat32).unsqueeze(1) + 1;  // i + 1
    EXPECT_TRUE((counts <= reach).all().item<bool>());
    if (score == 800.0) {
      EXPECT_TRUE(counts.select(1, 0).equal(reach.squeeze(1)));  // reached at key 0
    }
  }
}

}  // namespace cope_table_test
