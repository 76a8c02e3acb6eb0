// The short-sequence attention op (ops/short_attention/short_attention.h) against attention written out from
// Vaswani et al. (2017), softmax(q k^T / sqrt(d) + causal mask) v, in double and differentiated
// by LibTorch's autograd: the output and the gradients of q, k and v, float32 and float64, with
// and without the causal mask, at lengths that are and are not multiples of the kernel's 16-key
// padding and head widths that use each of its register tiles; strided inputs (the heads of one
// fused QKV projection, as the model passes them); any thread count; what it refuses; and the
// model with the op against the model with LibTorch's SDPA.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <tuple>
#include <vector>

#include "model_compare.h"
#include "roformer/model/attention_kernel.h"
#include "roformer/model/encoder.h"
#include "roformer/ops/common/cpu_vectors.h"
#include "roformer/ops/short_attention/short_attention.h"

namespace short_attention_test {

using namespace roformer;

namespace {

struct Result {
  torch::Tensor out, grad_q, grad_k, grad_v;
};

torch::Tensor formula(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal) {
  torch::Tensor scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(q.size(-1)));
  if (causal) {
    const int64_t S = q.size(2);
    const torch::Tensor future = torch::ones({S, S}, torch::kBool).triu(1);
    scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  }
  return torch::matmul(torch::softmax(scores, -1), v);
}

// q, k, v as the model makes them: [B, H, S, D] views of one [B, S, 3 * H * D] projection.
std::vector<torch::Tensor> qkv_views(const torch::Tensor& packed, int64_t H, int64_t D) {
  const int64_t B = packed.size(0), S = packed.size(1);
  std::vector<torch::Tensor> out;
  for (const torch::Tensor& t : packed.split(H * D, -1)) out.push_back(t.view({B, S, H, D}).transpose(1, 2));
  return out;
}

// Forward and backward (upstream gradient `up`) through the op or, with reference, the formula in
// double on the same values.
Result run(const torch::Tensor& packed0, int64_t H, int64_t D, bool causal, const torch::Tensor& up, bool reference) {
  torch::Tensor packed = (reference ? packed0.to(torch::kFloat64) : packed0.clone()).requires_grad_(true);
  const std::vector<torch::Tensor> qkv = qkv_views(packed, H, D);
  torch::Tensor out =
      reference ? formula(qkv[0], qkv[1], qkv[2], causal) : ops::short_attention(qkv[0], qkv[1], qkv[2], causal);
  out.backward(reference ? up.to(torch::kFloat64) : up);
  const std::vector<torch::Tensor> g = packed.grad().split(H * D, -1);
  auto heads = [&](const torch::Tensor& t) { return t.reshape({t.size(0), t.size(1), H, D}).transpose(1, 2); };
  return {out.detach(), heads(g[0]), heads(g[1]), heads(g[2])};
}

void expect_close(const torch::Tensor& got, const torch::Tensor& want, double tol, const std::string& what) {
  const torch::Tensor g = got.to(torch::kFloat64), e = want.to(torch::kFloat64);
  const double scale = std::max(1.0, e.abs().max().item<double>());
  const double err = (g - e).abs().max().item<double>();
  EXPECT_LE(err, tol * scale) << what << ": max error " << err << " (scale " << scale << ")";
}

}  // namespace

using Shapes = std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>;

// The op's output and gradients against the formula's, float32 and float64, causal or not, at
// (B, H, S, D) shapes.
void expect_the_formula(const Shapes& shapes) {
  for (const torch::ScalarType dtype : {torch::kFloat32, torch::kFloat64}) {
    const double tol = dtype == torch::kFloat64 ? 1e-12 : 2e-5;
    for (const auto& [B, H, S, D] : shapes) {
      for (const bool causal : {false, true}) {
        const torch::Tensor packed = torch::randn({B, S, 3 * H * D}, torch::kFloat64).mul(2.0).to(dtype);
        const torch::Tensor up = torch::randn({B, H, S, D}, torch::kFloat64).to(dtype);
        const Result got = run(packed, H, D, causal, up, false), want = run(packed, H, D, causal, up, true);
        const std::string what = std::string(c10::toString(dtype)) + " B" + std::to_string(B) + " H" +
                                 std::to_string(H) + " S" + std::to_string(S) + " D" + std::to_string(D) +
                                 (causal ? " causal" : "");
        EXPECT_EQ(got.out.scalar_type(), dtype) << what;
        expect_close(got.out, want.out, tol, what + " out");
        expect_close(got.grad_q, want.grad_q, tol, what + " grad q");
        expect_close(got.grad_k, want.grad_k, tol, what + " grad k");
        expect_close(got.grad_v, want.grad_v, tol, what + " grad v");
      }
    }
  }
}

TEST(ShortAttention, MatchesTheFormulaInDoubleWithGradients) {
  torch::manual_seed(7);
  // (B, H, S, D): S = 1 and lengths off the 16-key padding; D = 8, 16, 24, 32, 64 use the 1-, 2-
  // and 4-vector tiles and their sums; 512 is the last whole square, 600 and 1030 go in blocks of
  // query rows (the last one shorter). The CPU's widest vectors (64 bytes on AVX-512).
  expect_the_formula({{2, 3, 1, 8},
                      {2, 2, 5, 16},
                      {1, 3, 37, 24},
                      {3, 2, 64, 32},
                      {2, 2, 131, 64},
                      {1, 1, 512, 32},
                      {1, 2, 600, 16},
                      {1, 1, 1030, 8}});
}

// The 32-byte forms too (what a CPU without AVX-512 runs), at the shapes that use each tile.
TEST(ShortAttention, MatchesTheFormulaWithThirtyTwoByteVectors) {
  torch::manual_seed(8);
  ops::set_cpu_vector_bytes_for_testing(32);
  expect_the_formula({{2, 3, 1, 8}, {1, 3, 37, 24}, {2, 2, 131, 64}, {1, 2, 600, 16}});
  ops::set_cpu_vector_bytes_for_testing(0);
}

TEST(ShortAttention, OutputMemoryIsInTokenOrderAndNoGradModeKeepsNothing) {
  torch::manual_seed(3);
  const torch::Tensor q = torch::randn({2, 4, 20, 16}), k = torch::randn({2, 4, 20, 16}),
                      v = torch::randn({2, 4, 20, 16});
  torch::NoGradGuard no_grad;
  const torch::Tensor out = ops::short_attention(q, k, v, true);
  EXPECT_TRUE(out.transpose(1, 2).is_contiguous());  // [B, S, H, D] memory: heads merge without a copy
  EXPECT_FALSE(out.requires_grad());
  expect_close(out, formula(q.to(torch::kFloat64), k.to(torch::kFloat64), v.to(torch::kFloat64), true), 2e-5,
               "no-grad forward");
}

TEST(ShortAttention, ResultDoesNotDependOnTheThreadCount) {
  torch::manual_seed(11);
  const torch::Tensor packed = torch::randn({3, 48, 3 * 5 * 32});
  const torch::Tensor up = torch::randn({3, 5, 48, 32});
  const int threads = at::get_num_threads();
  std::vector<Result> results;
  for (const int n : {1, 2, 3}) {
    at::set_num_threads(n);
    results.push_back(run(packed, 5, 32, true, up, false));
  }
  at::set_num_threads(threads);
  for (size_t i = 1; i < results.size(); ++i) {
    EXPECT_TRUE(torch::equal(results[i].out, results[0].out));
    EXPECT_TRUE(torch::equal(results[i].grad_q, results[0].grad_q));
    EXPECT_TRUE(torch::equal(results[i].grad_k, results[0].grad_k));
    EXPECT_TRUE(torch::equal(results[i].grad_v, results[0].grad_v));
  }
}

TEST(ShortAttention, SaysWhatItTakesAndRefusesTheRest) {
  const torch::Tensor x = torch::randn({1, 2, 16, 8});
  EXPECT_TRUE(ops::short_attention_supports(x, x, x));
  EXPECT_TRUE(ops::short_attention_supports(x.to(torch::kFloat64), x.to(torch::kFloat64), x.to(torch::kFloat64)));
  const torch::Tensor odd = torch::randn({1, 2, 16, 12}),
                      long_seq = torch::randn({1, 1, ops::kShortAttentionMaxSeq + 1, 8});
  const torch::Tensor half = x.to(torch::kBFloat16), other = torch::randn({1, 2, 15, 8});
  EXPECT_FALSE(ops::short_attention_supports(odd, odd, odd));  // D not a multiple of 8
  EXPECT_FALSE(ops::short_attention_supports(long_seq, long_seq, long_seq));
  EXPECT_FALSE(ops::short_attention_supports(half, half, half));             // bf16: SDPA's
  EXPECT_FALSE(ops::short_attention_supports(x, other, other));              // keys of another length
  EXPECT_FALSE(ops::short_attention_supports(x, x.to(torch::kFloat64), x));  // mixed dtypes
  EXPECT_FALSE(ops::short_attention_supports(x[0], x[0], x[0]));             // not [B, H, S, D]
  try {
    ops::short_attention(odd, odd, odd, false);
    ADD_FAILURE() << "a head width of 12 must be refused";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("D a multiple of 8"), std::string::npos) << e.what();
  }
}

// One MLM step and one causal-LM step of the model: the op against LibTorch's SDPA, loss and every
// gradient; the kernel probe names the one that ran. RoPE (either pairing) and sinusoidal take
// the projection form (bias and rotation inside the op), xPos the plain one.
TEST(ShortAttention, ModelWithTheOpMatchesTheModelWithSdpa) {
  std::vector<config::PositionConfig> positions(4);
  positions[1].rope.pairing = config::RopePairing::half;
  positions[2].kind = config::PositionKind::sinusoidal;
  positions[3].kind = config::PositionKind::xpos;
  for (const config::PositionConfig& position : positions) {
    for (const auto objective : {config::Objective::mlm, config::Objective::causal_lm}) {
      for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
        config::ModelConfig c;
        c.hidden_dropout = c.attention_dropout = 0;
        c.objective = objective;
        c.position = position;
        c.attention_kernel = config::AttentionKernel::auto_;
        model::AttentionKernelProbe fused_probe;
        const roformer::testing::LossAndGrads fused = roformer::testing::model_loss_and_grads(c, dtype);
        EXPECT_EQ(fused_probe.summary(), "short-attention");
        c.attention_kernel = config::AttentionKernel::reference;
        model::AttentionKernelProbe reference_probe;
        const roformer::testing::LossAndGrads reference = roformer::testing::model_loss_and_grads(c, dtype);
        EXPECT_EQ(reference_probe.summary(), "sdpa-flash");
        SCOPED_TRACE(config::position_kind_names().name(position.kind) + " " + c10::toString(dtype));
        roformer::testing::expect_same_loss_and_grads(fused, reference, dtype == torch::kFloat64 ? 1e-12 : 1e-5);
      }
    }
  }
}

// Where the op does not apply (attention dropout in training, a padding mask, a head width of 12),
// auto and fused run SDPA as before.
TEST(ShortAttention, ModelFallsBackToSdpaWhereTheOpDoesNotApply) {
  auto kernel_for = [](config::ModelConfig c, bool padded) {
    model::EncoderModel m = model::build_model(c, 3);
    model::EncoderInput in;
    in.input_ids = torch::randint(0, c.vocab_size, {2, 16}, torch::kLong);
    if (padded) in.attention_mask = torch::ones({2, 16}, torch::kLong).index_put_({1, torch::indexing::Slice(10)}, 0);
    model::AttentionKernelProbe probe;
    m->forward(in);
    return probe.summary();
  };
  config::ModelConfig c;
  c.hidden_dropout = 0;
  c.attention_kernel = config::AttentionKernel::fused;
  c.attention_dropout = 0.1;
  EXPECT_NE(kernel_for(c, false), "short-attention");  // dropout: SDPA's math kernel
  c.attention_dropout = 0;
  EXPECT_EQ(kernel_for(c, false), "short-attention");
  EXPECT_EQ(kernel_for(c, true), "sdpa-flash");  // a padding mask
  c.hidden_size = 48;                            // 4 heads of 12
  EXPECT_EQ(kernel_for(c, false), "sdpa-flash");
}

}  // namespace short_attention_test
