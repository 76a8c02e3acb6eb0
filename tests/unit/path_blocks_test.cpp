// PaTH's attention in blocks (ops::path_block_attention) against the same attention on PaTH's
// explicit scores in double: path_scores (held to the authors' definition in path_test), FoX's
// c_i - c_j added before the scale, the causal mask, softmax and the values through LibTorch's
// autograd. Values and every input's gradient at lengths around the blocks' edges, with and
// without the gate; the same bits with one thread and two; float at both vector widths near
// double; and the shapes it refuses.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "roformer/model/position/path.h"
#include "roformer/ops/common/cpu_vectors.h"
#include "roformer/ops/tile_attention/path_blocks.h"

namespace path_blocks_test {

using namespace roformer;

namespace {

struct Inputs {
  torch::Tensor q, k, v, w_raw, beta, c;  // leaves; w = w_raw / |w_raw|, beta in (0, 2), c falling sums
  std::vector<torch::Tensor> leaves() const { return {q, k, v, w_raw, beta, c}; }
};

Inputs draw(int64_t B, int64_t H, int64_t S, int64_t D, torch::Dtype dtype, uint64_t seed) {
  torch::manual_seed(seed);
  const auto opts = torch::dtype(dtype);
  auto leaf = [](torch::Tensor t) { return t.requires_grad_(true); };
  return {leaf(torch::randn({B, H, S, D}, opts)),   leaf(torch::randn({B, H, S, D}, opts)),
          leaf(torch::randn({B, H, S, D}, opts)),   leaf(torch::randn({B, H, S, D}, opts)),
          leaf(2.0 * torch::rand({B, H, S}, opts)), leaf(-torch::rand({B, H, S}, opts).cumsum(-1))};
}

model::PathTransforms transforms(const Inputs& x) {
  return {x.w_raw / x.w_raw.norm(2, -1, true), x.beta};
}

// softmax over keys j <= i of scale (PaTH's score + c_i - c_j), times v, on explicit scores.
torch::Tensor explicit_attention(const Inputs& x, bool gate, int64_t block, double scale) {
  const int64_t S = x.q.size(2);
  torch::Tensor scores = model::path_scores(x.q, x.k, transforms(x), 0, S, block) * scale;
  if (gate) scores = scores + (x.c.unsqueeze(-1) - x.c.unsqueeze(2)) * scale;
  const torch::Tensor later = torch::ones({S, S}, torch::kBool).triu(1);
  return torch::softmax(scores.masked_fill(later, -std::numeric_limits<double>::infinity()), -1).matmul(x.v);
}

// The same values as x [B, H, S, ...] in memory laid out [B, S, H, ...], as the model's projections
// hand them to the kernels (differentiable: the gradients reach x).
torch::Tensor tokens_major(const torch::Tensor& x) {
  return x.transpose(1, 2).contiguous().transpose(1, 2);
}

// `strided`: v and the gate read in the tokens-major layout.
torch::Tensor block_attention(const Inputs& x, bool gate, int64_t block, double scale, bool strided = false) {
  const model::PathKeyBlocks kb = model::path_key_blocks(x.k, transforms(x), block, /*multiple=*/8);
  const model::PathQueryBlocks qb = model::path_query_blocks(x.q, kb, 0, kb.blocks);
  const torch::Tensor v = strided ? tokens_major(x.v) : x.v, c = strided ? tokens_major(x.c) : x.c;
  return ops::path_block_attention({qb.own, qb.rows, kb.carried, kb.product}, v, gate ? c : torch::Tensor(), scale);
}

// PaTH's layer state [B, H, S, D + 2] from the leaves: w, beta and c (which the blocks do not read).
torch::Tensor state_of(const Inputs& x, const model::PathTransforms& t, bool strided) {
  const torch::Tensor state = torch::cat({t.w, t.beta.unsqueeze(-1), x.c.unsqueeze(-1)}, -1);
  return strided ? tokens_major(state) : state;
}

// The output and the gradients of sum(out * weights) with respect to every leaf.
std::vector<torch::Tensor> with_gradients(const Inputs& x, const torch::Tensor& out, const torch::Tensor& weights) {
  std::vector<torch::Tensor> all{out.detach()};
  for (const torch::Tensor& g : torch::autograd::grad({(out * weights).sum()}, x.leaves(), {}, {}, false, true))
    all.push_back(g.defined() ? g : torch::zeros({0}));
  return all;
}

const char* kNames[] = {"output", "d q", "d k", "d v", "d w", "d beta", "d c"};

}  // namespace

TEST(PathBlocks, ValuesAndGradientsEqualTheExplicitScoresInDouble) {
  for (const int64_t S : {1, 47, 48, 49, 131, 300})
    for (const int64_t block : {8, 32})
      for (const bool gate : {false, true}) {
        const bool strided = gate == (S % 2 == 1);  // both layouts, with and without the gate
        SCOPED_TRACE("S " + std::to_string(S) + ", block " + std::to_string(block) + (gate ? ", gate" : "") +
                     (strided ? ", tokens-major v" : ""));
        const Inputs x = draw(2, 2, S, 8, torch::kFloat64, 100 + S);
        const torch::Tensor weights = torch::randn({2, 2, S, 8}, torch::kFloat64);
        const double scale = 1.0 / std::sqrt(8.0);
        const auto want = with_gradients(x, explicit_attention(x, gate, block, scale), weights);
        const auto got = with_gradients(x, block_attention(x, gate, block, scale, strided), weights);
        for (size_t i = 0; i < want.size(); ++i) {
          if (i == 6 && !gate) continue;  // c unused
          EXPECT_TRUE(torch::allclose(got[i], want[i], 1e-10, 1e-10))
              << kNames[i] << ": largest difference " << (got[i] - want[i]).abs().max().item<double>();
        }
      }
}

// A pass of a block differs from the explicit path where it should: dropping the gate's sign or
// the scale moves the output far beyond rounding (the comparison above can fail).
TEST(PathBlocks, AWrongScaleOrGateIsSeen) {
  const Inputs x = draw(1, 2, 40, 16, torch::kFloat64, 5);
  const torch::Tensor want = explicit_attention(x, true, 16, 0.25);
  EXPECT_TRUE(torch::allclose(block_attention(x, true, 16, 0.25), want, 1e-10, 1e-10));
  EXPECT_GT((block_attention(x, true, 16, 0.3) - want).abs().max().item<double>(), 1e-3);
  EXPECT_GT((block_attention(x, false, 16, 0.25) - want).abs().max().item<double>(), 1e-3);
}

// Each (pair, query block) of the forward and each pair of the backward runs on one thread in a
// fixed order: one thread and two give the same bits.
TEST(PathBlocks, OneThreadAndTwoGiveTheSameBits) {
  const int threads = at::get_num_threads();
  const Inputs x = draw(2, 3, 131, 16, torch::kFloat32, 7);
  const torch::Tensor weights = torch::randn({2, 3, 131, 16});
  std::vector<std::vector<torch::Tensor>> runs;
  for (const int n : {1, 2}) {
    at::set_num_threads(n);
    runs.push_back(with_gradients(x, block_attention(x, true, 32, 0.25), weights));
  }
  at::set_num_threads(threads);
  for (size_t i = 0; i < runs[0].size(); ++i) EXPECT_TRUE(torch::equal(runs[0][i], runs[1][i])) << kNames[i];
}

// Float at 32- and 64-byte vectors (where the CPU has them) near double's values and gradients.
TEST(PathBlocks, FloatAtEitherVectorWidthIsNearDouble) {
  const Inputs x = draw(2, 2, 100, 32, torch::kFloat64, 9);
  const torch::Tensor weights = torch::randn({2, 2, 100, 32}, torch::kFloat64);
  const auto want = with_gradients(x, block_attention(x, true, 32, 1.0 / std::sqrt(32.0)), weights);
  Inputs f;
  auto as_float = [](const torch::Tensor& t) { return t.detach().to(torch::kFloat32).requires_grad_(true); };
  f = {as_float(x.q), as_float(x.k), as_float(x.v), as_float(x.w_raw), as_float(x.beta), as_float(x.c)};
  for (const int bytes : {32, 64}) {
    if (bytes == 64 && !ops::wide_cpu_vectors_available()) continue;
    SCOPED_TRACE(std::to_string(bytes) + "-byte vectors");
    ops::set_cpu_vector_bytes_for_testing(bytes);
    const auto got =
        with_gradients(f, block_attention(f, true, 32, 1.0 / std::sqrt(32.0)), weights.to(torch::kFloat32));
    ops::set_cpu_vector_bytes_for_testing(0);
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(torch::allclose(got[i].to(torch::kFloat64), want[i], 1e-4, 1e-4))
          << kNames[i] << ": largest difference " << (got[i].to(torch::kFloat64) - want[i]).abs().max().item<double>();
  }
}

// The blocks formed per (pair, block) in one kernel equal path_key_blocks and path_query_blocks'
// batched LibTorch products in double, values and the gradients of all four through weights on
// each (the state's c, which the blocks do not read, with a zero gradient), from contiguous inputs
// and from the tokens-major views the model hands over.
TEST(PathBlocks, FormedInOnePassEqualTheBatchedProducts) {
  for (const int64_t S : {1, 47, 48, 131})
    for (const int64_t block : {8, 32}) {
      const bool strided = (S + block) % 2 == 1;
      SCOPED_TRACE("S " + std::to_string(S) + ", block " + std::to_string(block) + (strided ? ", tokens-major" : ""));
      const Inputs x = draw(2, 2, S, 16, torch::kFloat64, 200 + S);
      const model::PathTransforms t = transforms(x);
      const model::PathKeyBlocks kb = model::path_key_blocks(x.k, t, block, /*multiple=*/8);
      const model::PathQueryBlocks qb = model::path_query_blocks(x.q, kb, 0, kb.blocks);
      const ops::PathBlocks got =
          strided ? ops::path_blocks(tokens_major(x.q), tokens_major(x.k), state_of(x, t, true), block)
                  : ops::path_blocks(x.q, x.k, state_of(x, t, false), block);
      const std::vector<torch::Tensor> want_all{qb.own, qb.rows, kb.carried, kb.product},
          got_all{got.own, got.rows, got.carried, got.product};
      torch::Tensor want_loss = torch::zeros({}, torch::kFloat64), got_loss = want_loss;
      for (size_t i = 0; i < 4; ++i) {
        ASSERT_EQ(got_all[i].sizes(), want_all[i].sizes()) << i;
        EXPECT_TRUE(torch::allclose(got_all[i], want_all[i], 1e-10, 1e-10))
            << "tensor " << i << ": largest difference " << (got_all[i] - want_all[i]).abs().max().item<double>();
        const torch::Tensor weights = torch::randn(want_all[i].sizes(), torch::kFloat64);
        want_loss = want_loss + (want_all[i] * weights).sum();
        got_loss = got_loss + (got_all[i] * weights).sum();
      }
      const std::vector<torch::Tensor> leaves{x.q, x.k, x.w_raw, x.beta, x.c};
      const auto want = torch::autograd::grad({want_loss}, leaves, {}, /*retain_graph=*/true, false, true);
      const auto grads = torch::autograd::grad({got_loss}, leaves);
      for (size_t i = 0; i < 4; ++i)
        EXPECT_TRUE(torch::allclose(grads[i], want[i], 1e-10, 1e-10))
            << "d " << i << ": largest difference " << (grads[i] - want[i]).abs().max().item<double>();
      EXPECT_FALSE(want[4].defined());
      EXPECT_TRUE(torch::equal(grads[4], torch::zeros_like(x.c)));
    }
}

TEST(PathBlocks, TakesTheCpuInFloatOrDoubleWithMultiplesOfEight) {
  EXPECT_TRUE(ops::path_block_attention_takes(torch::zeros({1, 1, 5, 16}), 32));
  EXPECT_TRUE(ops::path_block_attention_takes(torch::zeros({1, 1, 5, 8}, torch::kFloat64), 8));
  EXPECT_FALSE(ops::path_block_attention_takes(torch::zeros({1, 1, 5, 12}), 32));
  EXPECT_FALSE(ops::path_block_attention_takes(torch::zeros({1, 1, 5, 16}), 12));
  EXPECT_FALSE(ops::path_block_attention_takes(torch::zeros({1, 1, 5, 16}, torch::kBFloat16), 32));
  const Inputs x = draw(1, 1, 20, 8, torch::kFloat64, 3);
  const model::PathKeyBlocks kb = model::path_key_blocks(x.k, transforms(x), 8, 8);
  const model::PathQueryBlocks qb = model::path_query_blocks(x.q, kb, 0, kb.blocks);
  EXPECT_THROW(ops::path_block_attention({qb.own, qb.rows, kb.carried, kb.product}, x.v.narrow(2, 0, 10), {}, 1.0),
               std::exception);  // blocks of 24 tokens for 10
  EXPECT_THROW(ops::path_block_attention({qb.own, qb.rows, kb.carried, kb.product}, x.v, x.c.to(torch::kFloat32), 1.0),
               std::exception);
}

}  // namespace path_blocks_test
