// The short-sequence attention op with CoPE's term (ops::short_attention_cope) against CoPE
// attention written out with LibTorch's unfused ops in double (Golovneva et al. 2024: gates
// sigmoid(q.k / sqrt(d)), positions counted from the key to the query, clamped to the table, the
// table interpolated there and added to the scores; softmax; times v) and differentiated by
// autograd: the output and the gradients of q, k, v and the table, causal and bidirectional, at
// lengths off the kernel's 16-key padding, with tables that clamp most positions and tables that
// clamp none; float against double at any thread count; what it refuses; and CoPE models training
// through it against the same models on the explicit scores (model.attention_kernel reference).
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "roformer/model/attention_kernel.h"
#include "roformer/model/encoder.h"
#include "roformer/model/position/cope.h"
#include "roformer/ops/short_attention/short_attention.h"
#include "tiny_models.h"

namespace short_attention_cope_test {

using namespace roformer;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// CoPE attention in unfused ops: the family's formula before any fusion.
torch::Tensor formula(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                      const torch::Tensor& at_integers, double scale, bool causal) {
  torch::Tensor scores = torch::matmul(q, k.transpose(-1, -2)) * scale;
  if (causal) scores = scores.masked_fill(torch::ones({q.size(2), q.size(2)}, torch::kBool).triu(1), -kInf);
  const torch::Tensor pos = model::cope_positions(scores, at_integers.size(-1));
  const torch::Tensor floor = pos.floor(), w = pos - floor;
  const torch::Tensor low = at_integers.gather(-1, floor.to(torch::kLong));
  const torch::Tensor high = at_integers.gather(-1, pos.ceil().to(torch::kLong));
  return torch::matmul(torch::softmax(scores + high * w + low * (1 - w), -1), v);
}

struct Result {
  torch::Tensor out, grad_q, grad_k, grad_v, grad_a;
};

// Forward and backward with upstream gradient `up`, through the op or (reference) the formula in
// double. q, k, v are [B, H, S, D] views of one [B, S, 3 H D] projection, as the model passes them.
Result run(const torch::Tensor& packed0, const torch::Tensor& a0, int64_t H, bool causal, const torch::Tensor& up,
           bool reference) {
  const auto dtype = reference ? torch::kFloat64 : packed0.scalar_type();
  const torch::Tensor packed = packed0.to(dtype).detach().requires_grad_();
  const torch::Tensor a = a0.to(dtype).detach().requires_grad_();
  const int64_t B = packed.size(0), S = packed.size(1), D = packed.size(2) / (3 * H);
  std::vector<torch::Tensor> qkv;
  for (const torch::Tensor& t : packed.split(H * D, -1)) qkv.push_back(t.view({B, S, H, D}).transpose(1, 2));
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const torch::Tensor out = reference ? formula(qkv[0], qkv[1], qkv[2], a, scale, causal)
                                      : ops::short_attention_cope(qkv[0], qkv[1], qkv[2], a, scale, causal);
  out.backward(up.to(dtype));
  const std::vector<torch::Tensor> g = packed.grad().split(H * D, -1);
  auto heads = [&](const torch::Tensor& t) { return t.reshape({B, S, H, D}).transpose(1, 2); };
  return {out.detach(), heads(g[0]), heads(g[1]), heads(g[2]), a.grad()};
}

void expect_close(const torch::Tensor& got, const torch::Tensor& want, double tol, const std::string& what) {
  const torch::Tensor g = got.to(torch::kFloat64), e = want.to(torch::kFloat64);
  const double scale = std::max(1.0, e.abs().max().item<double>());
  const double err = (g - e).abs().max().item<double>();
  EXPECT_LE(err, tol * scale) << what << ": max error " << err << " (scale " << scale << ")";
}

void expect_all_close(const Result& got, const Result& want, double tol, const std::string& what) {
  expect_close(got.out, want.out, tol, what + " out");
  expect_close(got.grad_q, want.grad_q, tol, what + " grad q");
  expect_close(got.grad_k, want.grad_k, tol, what + " grad k");
  expect_close(got.grad_v, want.grad_v, tol, what + " grad v");
  expect_close(got.grad_a, want.grad_a, tol, what + " grad table");
}

}  // namespace

TEST(ShortAttentionCope, EqualsCopeAttentionInDoubleWithGradients) {
  torch::manual_seed(21);
  // (B, H, S, D, P): S = 1 and lengths off the 16-key padding; P = 1 (no gradient through the
  // positions), 4 (most positions clamped) and more positions than keys (none clamped).
  const std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>> shapes{
      {2, 3, 1, 8, 4},    {2, 2, 5, 16, 1},    {1, 3, 37, 24, 4},
      {2, 2, 64, 32, 80}, {1, 2, 131, 16, 24}, {1, 1, 600, 8, 24}};  // past 512: blocks of query rows
  for (const auto& [B, H, S, D, P] : shapes)
    for (const bool causal : {true, false}) {
      const torch::Tensor packed = torch::randn({B, S, 3 * H * D}, torch::kFloat64) * 1.5;
      const torch::Tensor a = torch::randn({B, H, S, P}, torch::kFloat64) * 2;
      const torch::Tensor up = torch::randn({B, H, S, D}, torch::kFloat64);
      const Result got = run(packed, a, H, causal, up, false), want = run(packed, a, H, causal, up, true);
      // rounding grows with the keys a row counts: at 600 keys up to 1.3e-12 of the scale, as at 512
      // in one square (measured), so the blocks add none of it
      expect_all_close(
          got, want, S > 512 ? 2e-12 : 1e-12,
          "S" + std::to_string(S) + " D" + std::to_string(D) + " P" + std::to_string(P) + (causal ? " causal" : ""));
      if (P > 1 && S > 1) {  // the term moves the result (one key takes all the weight): the comparison sees it
        const Result plain = run(packed, torch::zeros_like(a), H, causal, up, true);
        EXPECT_GT((plain.out - want.out).abs().max().item<double>(), 1e-3);
      }
    }
}

TEST(ShortAttentionCope, FloatFollowsDoubleAtAnyThreadCount) {
  torch::manual_seed(22);
  const int64_t B = 2, H = 2, S = 70, D = 32, P = 24;
  const torch::Tensor packed = torch::randn({B, S, 3 * H * D}, torch::kFloat64);
  const torch::Tensor a = torch::randn({B, H, S, P}, torch::kFloat64);
  const torch::Tensor up = torch::randn({B, H, S, D}, torch::kFloat64);
  const Result want = run(packed, a, H, true, up, true);
  const int threads = at::get_num_threads();
  Result first;
  for (const int t : {1, 2}) {
    at::set_num_threads(t);
    const Result got = run(packed.to(torch::kFloat32), a.to(torch::kFloat32), H, true, up, false);
    EXPECT_EQ(got.out.scalar_type(), torch::kFloat32);
    expect_all_close(got, want, 2e-5, "float, threads " + std::to_string(t));
    if (t == 1) {
      first = got;
    } else {  // each pair is computed by one thread in a fixed order
      EXPECT_TRUE(torch::equal(got.out, first.out) && torch::equal(got.grad_q, first.grad_q) &&
                  torch::equal(got.grad_a, first.grad_a));
    }
  }
  at::set_num_threads(threads);
}

TEST(ShortAttentionCope, RefusesATableOfTheWrongShapeOrDtype) {
  const torch::Tensor q = torch::randn({1, 2, 5, 8});
  const double scale = 1.0 / std::sqrt(8.0);
  EXPECT_NO_THROW(ops::short_attention_cope(q, q, q, torch::zeros({1, 2, 5, 3}), scale, true));
  EXPECT_THROW(ops::short_attention_cope(q, q, q, torch::zeros({1, 2, 4, 3}), scale, true), c10::Error);
  EXPECT_THROW(ops::short_attention_cope(q, q, q, torch::zeros({1, 2, 5, 0}), scale, true), c10::Error);
  EXPECT_THROW(ops::short_attention_cope(q, q, q, torch::zeros({1, 2, 5, 3}, torch::kFloat64), scale, true),
               c10::Error);
  EXPECT_THROW(ops::short_attention_cope(q, q, q, torch::zeros({2, 5, 3}), scale, true), c10::Error);
  const torch::Tensor long_q = torch::randn({1, 1, ops::kShortAttentionMaxSeq + 1, 8});
  EXPECT_THROW(ops::short_attention_cope(long_q, long_q, long_q, torch::zeros({1, 1, long_q.size(2), 3}), scale, true),
               c10::Error);
}

namespace {

struct Step {
  torch::Tensor loss;
  std::vector<torch::Tensor> grads;
  std::string kernels;
};

// One training step's loss (a fixed random readout of the output) and parameter gradients of a
// CoPE model in double (its tables drawn, not the authors' zeros) on `tokens` tokens, with the
// given attention kernel.
Step train_step(config::Objective objective, config::AttentionKernel kernel, int64_t tokens) {
  config::ModelConfig c = tiny_models::tiny_model(config::PositionKind::cope, objective);
  c.position.cope.max_positions = 24;
  c.attention_kernel = kernel;
  auto [m, ids] = tiny_models::double_model(c, tokens);
  m->train();
  model::AttentionKernelProbe probe;
  model::EncoderInput in;
  in.input_ids = ids;
  const torch::Tensor out = m->forward(in);
  // A fixed random readout: the squares of layer-normed states would sum to a constant.
  const torch::Tensor loss = (out * torch::randn(out.sizes(), torch::kFloat64)).sum();
  loss.backward();
  Step s{loss.detach(), {}, probe.summary()};
  for (const auto& p : m->parameters()) s.grads.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  return s;
}

}  // namespace

// A causal and a bidirectional CoPE model train through the op and get the loss and every
// parameter's gradient of the explicit scores; past the op's 512 tokens training keeps them.
TEST(ShortAttentionCope, CopeModelsTrainThroughItAsOnTheExplicitScores) {
  for (const auto objective : {config::Objective::causal_lm, config::Objective::mlm}) {
    const Step fused = train_step(objective, config::AttentionKernel::auto_, 70);
    const Step reference = train_step(objective, config::AttentionKernel::reference, 70);
    EXPECT_EQ(fused.kernels, model::attention_kernel::kShort);
    EXPECT_EQ(reference.kernels, model::attention_kernel::kExplicitScores);
    EXPECT_LE((fused.loss - reference.loss).abs().item<double>(), 1e-10);  // a sum over 2 x 70 x 23 outputs
    ASSERT_EQ(fused.grads.size(), reference.grads.size());
    for (size_t i = 0; i < fused.grads.size(); ++i) {
      ASSERT_EQ(fused.grads[i].defined(), reference.grads[i].defined()) << i;
      if (fused.grads[i].defined())
        expect_close(fused.grads[i], reference.grads[i], 1e-12, "grad " + std::to_string(i));
    }
  }
  EXPECT_NE(
      train_step(config::Objective::causal_lm, config::AttentionKernel::auto_, ops::kShortAttentionMaxSeq + 8).kernels,
      model::attention_kernel::kShort);
}

}  // namespace short_attention_cope_test
