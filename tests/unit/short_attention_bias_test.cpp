// The short-sequence kernel with a relative bias inside (ops::short_attention_bias) against the
// formula softmax(q k^T / sqrt(d) + bias[h, S - 1 + j - i] (+ causal mask)) v written with
// LibTorch in double and differentiated by its autograd: the output and the gradients of q, k, v
// and the bias (summed by offset over the batch and the rows), float32 and float64, causal and
// not, at lengths on and off the kernel's 16-key padding and in blocks of query rows past 512, and
// ALiBi's slopes at 1024 (probabilities below float's normals); then the model: ALiBi,
// T5's buckets (learned: its table's gradient), KERPLE and Sandwich, causal and masked, take the
// kernel under auto and give the loss and every gradient of the model with SDPA and the mask.
#include <gtest/gtest.h>
#include <torch/torch.h>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include <limits>
#include <tuple>
#include <vector>

#include "model_compare.h"
#include "roformer/model/attention_kernel.h"
#include "roformer/model/attention_plan.h"
#include "roformer/ops/short_attention/short_attention.h"

namespace short_attention_bias_test {

using namespace roformer;

torch::Tensor formula(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& bias,
                      bool causal) {
  const int64_t S = q.size(2);
  const torch::Tensor offset = torch::arange(S).unsqueeze(0) - torch::arange(S).unsqueeze(1) + (S - 1);  // j - i
  torch::Tensor scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(q.size(-1))) +
                         bias.index({torch::indexing::Slice(), offset});  // [H, S, S]
  if (causal) scores = scores.masked_fill(torch::ones({S, S}, torch::kBool).triu(1), -INFINITY);
  return torch::matmul(torch::softmax(scores, -1), v);
}

struct Result {
  torch::Tensor out, dq, dk, dv, dbias;
};

Result run(const std::vector<torch::Tensor>& inputs, const torch::Tensor& up, bool causal, bool reference,
           torch::ScalarType dtype) {
  std::vector<torch::Tensor> x;
  for (const torch::Tensor& t : inputs) x.push_back(t.to(reference ? torch::kFloat64 : dtype).requires_grad_(true));
  torch::Tensor out =
      reference ? formula(x[0], x[1], x[2], x[3], causal) : ops::short_attention_bias(x[0], x[1], x[2], x[3], causal);
  out.backward(up.to(out.scalar_type()));
  return {out.detach(), x[0].grad(), x[1].grad(), x[2].grad(), x[3].grad()};
}

void expect_close(const torch::Tensor& got, const torch::Tensor& want, double tol, const std::string& what) {
  const torch::Tensor g = got.to(torch::kFloat64), e = want.to(torch::kFloat64);
  const double scale = std::max(1.0, e.abs().max().item<double>());
  EXPECT_LE((g - e).abs().max().item<double>(), tol * scale) << what;
}

TEST(ShortAttentionBias, MatchesTheFormulaInDoubleWithGradients) {
  torch::manual_seed(5);
  const std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>> shapes{
      {2, 3, 1, 8}, {2, 2, 37, 16}, {3, 2, 64, 32}, {1, 2, 131, 24}, {1, 1, 512, 8}, {1, 2, 700, 8}};
  for (const torch::ScalarType dtype : {torch::kFloat64, torch::kFloat32}) {
    for (const auto& [B, H, S, D] : shapes) {
      for (const bool causal : {true, false}) {
        const std::vector<torch::Tensor> inputs{
            torch::randn({B, H, S, D}, torch::kFloat64), torch::randn({B, H, S, D}, torch::kFloat64),
            torch::randn({B, H, S, D}, torch::kFloat64), torch::randn({H, 2 * S - 1}, torch::kFloat64)};
        const torch::Tensor up = torch::randn({B, H, S, D}, torch::kFloat64);
        const Result got = run(inputs, up, causal, false, dtype), want = run(inputs, up, causal, true, dtype);
        const std::string what = std::string(c10::toString(dtype)) + " S" + std::to_string(S) + " D" +
                                 std::to_string(D) + (causal ? " causal" : "");
        const double tol = dtype == torch::kFloat64 ? 1e-12 : 3e-5;
        expect_close(got.out, want.out, tol, what + " out");
        expect_close(got.dq, want.dq, tol, what + " grad q");
        expect_close(got.dk, want.dk, tol, what + " grad k");
        expect_close(got.dv, want.dv, tol, what + " grad v");
        expect_close(got.dbias, want.dbias, tol, what + " grad bias");
      }
    }
  }
}

// ALiBi's bias at a thousand tokens spans hundreds, so most probabilities are below float's
// smallest normal: the kernel flushes them to zero (ops::FlushSubnormals) and still matches the
// formula, and the caller's floating-point mode is what it was after the call.
TEST(ShortAttentionBias, ASteepBiasMatchesTheFormulaAndLeavesTheFloatingPointModeAlone) {
  torch::manual_seed(9);
  const int64_t B = 1, H = 2, S = 1024, D = 8;
  const torch::Tensor offsets = torch::arange(-(S - 1), S, torch::kFloat64);
  const torch::Tensor slopes = torch::tensor({0.5, 0.25}, torch::kFloat64).unsqueeze(1);
  const std::vector<torch::Tensor> inputs{torch::randn({B, H, S, D}, torch::kFloat64),
                                          torch::randn({B, H, S, D}, torch::kFloat64),
                                          torch::randn({B, H, S, D}, torch::kFloat64), -slopes * offsets.abs()};
  const torch::Tensor up = torch::randn({B, H, S, D}, torch::kFloat64);
  const int threads = at::get_num_threads();
  at::set_num_threads(1);  // the kernel runs on this thread
#if defined(__x86_64__)
  const unsigned before = _mm_getcsr();
#endif
  const Result got = run(inputs, up, /*causal=*/true, false, torch::kFloat32);
#if defined(__x86_64__)
  EXPECT_EQ(_mm_getcsr(), before);
#endif
  at::set_num_threads(threads);
  const Result want = run(inputs, up, true, true, torch::kFloat32);
  expect_close(got.out, want.out, 3e-5, "out");
  expect_close(got.dq, want.dq, 3e-5, "grad q");
  expect_close(got.dk, want.dk, 3e-5, "grad k");
  expect_close(got.dv, want.dv, 3e-5, "grad v");
  expect_close(got.dbias, want.dbias, 3e-5, "grad bias");
}

// The bias families through the model: auto takes the kernel (the probe; its projection form, or
// the plain one under QK-norm), reference SDPA with the mask; the same loss and gradients, T5's
// bucket table included.
TEST(ShortAttentionBias, BiasFamiliesInTheModelMatchSdpaWithTheMask) {
  for (const auto kind : {config::PositionKind::alibi, config::PositionKind::t5_bias, config::PositionKind::kerple,
                          config::PositionKind::sandwich}) {
    for (const int variant : {0, 1, 2}) {  // causal, masked LM; causal with QK-norm (q, k not from the projection)
      config::ModelConfig c;
      c.hidden_dropout = c.attention_dropout = 0;
      c.objective = variant == 1 ? config::Objective::mlm : config::Objective::causal_lm;
      c.qk_norm = variant == 2;
      c.position.kind = kind;
      c.attention_kernel = config::AttentionKernel::auto_;
      model::AttentionKernelProbe fused_probe;
      const roformer::testing::LossAndGrads fused = roformer::testing::model_loss_and_grads(c, torch::kFloat64);
      EXPECT_EQ(fused_probe.summary(), "short-attention") << config::position_kind_names().name(kind);
      c.attention_kernel = config::AttentionKernel::reference;
      model::AttentionKernelProbe reference_probe;
      const roformer::testing::LossAndGrads reference = roformer::testing::model_loss_and_grads(c, torch::kFloat64);
      EXPECT_NE(reference_probe.summary(), "short-attention");
      SCOPED_TRACE(config::position_kind_names().name(kind));
      roformer::testing::expect_same_loss_and_grads(fused, reference, 1e-12);
    }
  }
}

}  // namespace short_attention_bias_test

namespace short_attention_bias_test {

// Which path auto picks past 512 tokens (model/attention_plan.h): the bias families keep the
// kernel, causal, up to its limit (SDPA would take their bias as a mask: 1.7-2.0x slower in
// training at 1024), and a learned bias bidirectional too (SDPA's math kernel: 1.4-1.5x slower);
// plain causal attention goes back to SDPA's flash kernel past 512 (as fast there),
// bidirectional past 128; fused takes the kernel wherever it fits.
TEST(ShortAttentionBias, AutoKeepsTheBiasFamiliesInTheKernelUpToItsLimit) {
  using model::AttentionPath;
  auto facts = [](int64_t S, bool causal, bool bias) {
    model::AttentionPassFacts f;
    f.batch = 2, f.heads = 4, f.seq = S, f.head_dim = 32, f.causal = causal;
    f.short_shape = ops::short_attention_shape_supported(S, 32, torch::kFloat, torch::kCPU);
    f.mask_beyond_causality = f.relative_bias_alone = bias;
    f.training = f.autograd = true;
    return f;
  };
  EXPECT_EQ(model::plan_attention(facts(1024, true, true)).path, AttentionPath::short_projection);
  EXPECT_EQ(model::plan_attention(facts(ops::kShortAttentionMaxSeq, true, true)).path, AttentionPath::short_projection);
  model::AttentionPassFacts qk_norm = facts(1024, true, true);
  qk_norm.projection_not_fusable = true;
  EXPECT_EQ(model::plan_attention(qk_norm).path, AttentionPath::short_with_bias);
  EXPECT_EQ(model::plan_attention(facts(ops::kShortAttentionMaxSeq + 1, true, true)).path, AttentionPath::sdpa);
  EXPECT_EQ(model::plan_attention(facts(1024, false, true)).path, AttentionPath::sdpa);  // ALiBi, Sandwich
  model::AttentionPassFacts learned = facts(1024, false, true);                          // T5, KERPLE in training
  learned.relative_bias_learned = true;
  EXPECT_EQ(model::plan_attention(learned).path, AttentionPath::short_projection);
  EXPECT_EQ(model::plan_attention(facts(model::kShortCausalAutoSeq, true, false)).path,
            AttentionPath::short_projection);
  EXPECT_EQ(model::plan_attention(facts(model::kShortCausalAutoSeq + 1, true, false)).path, AttentionPath::sdpa);
  model::AttentionPassFacts fused = facts(1024, false, false);
  fused.kernel = config::AttentionKernel::fused;
  EXPECT_EQ(model::plan_attention(fused).path, AttentionPath::short_projection);
}

// On CUDA (no short kernel there) the bias families take the CUDA tiles in evaluation under
// fused alone, with a right padding too: auto keeps SDPA with the mask, and training keeps it (the
// tiles have no backward), as does a padding that is not a right padding.
TEST(ShortAttentionBias, CudaTilesTakeTheBiasInFusedEvaluationOnly) {
  using model::AttentionPath;
  model::AttentionPassFacts f;
  f.batch = 1, f.heads = 12, f.seq = 32768, f.head_dim = 64, f.causal = true;
  f.mask_beyond_causality = f.relative_bias_alone = true;
  f.cuda_tile_shape = true;
  EXPECT_EQ(model::plan_attention(f).path, AttentionPath::sdpa);  // auto
  f.kernel = config::AttentionKernel::fused;
  EXPECT_EQ(model::plan_attention(f).path, AttentionPath::bias_tiles);
  f.causal = false;
  EXPECT_EQ(model::plan_attention(f).path, AttentionPath::bias_tiles);
  f.autograd = true;
  EXPECT_EQ(model::plan_attention(f).path, AttentionPath::sdpa);
  f.autograd = false;
  f.cuda_tile_shape = false;  // head_dim 96, or fp16 before compute capability 8.0
  EXPECT_EQ(model::plan_attention(f).path, AttentionPath::sdpa);
  f.cuda_tile_shape = true;
  f.relative_bias_alone = false;  // a padding beside the bias: a right padding, as key lengths
  f.relative_bias_padded = true;
  EXPECT_EQ(model::plan_attention(f).path, AttentionPath::bias_tiles);
  f.autograd = true;
  EXPECT_EQ(model::plan_attention(f).path, AttentionPath::sdpa);
  f.autograd = false;
  f.relative_bias_padded = false;  // a left padding, or one a row with no tokens
  EXPECT_EQ(model::plan_attention(f).path, AttentionPath::sdpa);
}

}  // namespace short_attention_bias_test
