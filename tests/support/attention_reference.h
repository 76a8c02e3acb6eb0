// Test helper for the position families' reference tests: one attention module (layer 1, so
// per-layer parameters are picked by index) in double with every position parameter random,
// run as the encoder runs it (the family's bias inside the attention mask, causal or not, all
// query rows at once or in blocks), and the reference it is held against: softmax over the
// allowed keys of a score written as a function of (head, i, j), then the weighted values,
// computed with explicit loops.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "roformer/model/attention.h"

namespace attention_reference {

inline const auto kDouble = torch::TensorOptions().dtype(torch::kFloat64);
constexpr int64_t kHidden = 16, kHeads = 2, kD = 8, kS = 7;

// The fixture's model size (hidden 16, 2 heads of 8, 2 layers, no dropout) for `kind`.
inline roformer::config::ModelConfig small_model(roformer::config::PositionKind kind, bool causal) {
  roformer::config::ModelConfig c;
  c.objective = causal ? roformer::config::Objective::causal_lm : roformer::config::Objective::mlm;
  c.hidden_size = kHidden;
  c.num_heads = kHeads;
  c.num_layers = 2;
  c.attention_dropout = 0;
  c.position.kind = kind;
  return c;
}

inline double dotd(const torch::Tensor& a, const torch::Tensor& b) {
  return (a * b).sum().item<double>();
}

struct Fixture {
  std::shared_ptr<roformer::model::PositionEncodingImpl> position;
  roformer::model::Attention attn{nullptr};
  torch::Tensor x, q, k, v;  // x [1, S, hidden]; q, k, v [H, S, D] as the module projects them
  explicit Fixture(const roformer::config::ModelConfig& c) {
    torch::manual_seed(21);
    position = roformer::model::make_position_encoding(c);
    attn = roformer::model::Attention(c, position, /*layer=*/1);
    attn->to(torch::kFloat64);
    position->to(torch::kFloat64);
    attn->eval();
    torch::NoGradGuard no_grad;
    for (auto& p : position->parameters()) p.normal_(0.0, 0.5);
    x = torch::randn({1, kS, kHidden}, kDouble);
    auto proj = [&](const torch::nn::Linear& l) {
      return torch::nn::functional::linear(x, l->weight, l->bias).view({kS, kHeads, kD}).transpose(0, 1);
    };
    q = proj(attn->self->query);
    k = proj(attn->self->key);
    v = proj(attn->self->value);
  }
  // The module's output, forming the scores for `block` query rows at a time (0: all at once),
  // with the mask the encoder would build (the family's bias, causality).
  torch::Tensor run(bool causal, int64_t block = 0) {
    roformer::model::AttentionContext ctx;
    ctx.positions = torch::arange(kS, torch::kLong);
    ctx.causal = causal;
    ctx.score_block_rows = block;
    torch::NoGradGuard no_grad;
    ctx.mask = roformer::model::AttentionMask(position->relative_bias(kS, torch::kCPU), {}, causal, kS, torch::kFloat64,
                                              torch::kCPU, position->traits().forms_scores);
    if (attn->ssmax_scale.defined()) ctx.ssmax_log_keys = roformer::model::ssmax_log_keys(kS, causal, {}, torch::kCPU);
    return attn->attend(x, ctx);
  }
  // The output equals `want` with all queries at once and in blocks of 3 rows (3 + 3 + 1).
  void expect_output(bool causal, const torch::Tensor& want) {
    for (int64_t block : {int64_t{0}, int64_t{3}}) {
      const torch::Tensor got = run(causal, block);
      EXPECT_TRUE(torch::allclose(got, want, 1e-10, 1e-10))
          << "causal " << causal << " block " << block << " " << (got - want).abs().max();
    }
  }
  // A mutated transcription must not pass: its output differs from the module's.
  void expect_output_differs(bool causal, const torch::Tensor& mutated) {
    EXPECT_GT((run(causal) - mutated).abs().max().item<double>(), 1e-6) << "causal " << causal;
  }
  // Softmax over the allowed keys of scores[h][i][j], then sum_j a_ij value(h, i, j) -> [1, S, hidden].
  template <typename Score, typename Value>
  torch::Tensor expected(bool causal, Score score, Value value) {
    torch::Tensor ctx = torch::zeros({kS, kHeads, kD}, kDouble);
    for (int64_t h = 0; h < kHeads; ++h)
      for (int64_t i = 0; i < kS; ++i) {
        std::vector<double> e;
        double top = -1e300;
        for (int64_t j = 0; j <= (causal ? i : kS - 1); ++j) {
          e.push_back(score(h, i, j));
          top = std::max(top, e.back());
        }
        double z = 0;
        for (double& s : e) z += (s = std::exp(s - top));
        for (int64_t j = 0; j < static_cast<int64_t>(e.size()); ++j) ctx[i][h] += e[j] / z * value(h, i, j);
      }
    return torch::nn::functional::linear(ctx.reshape({1, kS, kHidden}), attn->output->dense->weight,
                                         attn->output->dense->bias);
  }
  // The same with the plain values v_j.
  template <typename Score>
  torch::Tensor expected(bool causal, Score score) {
    return expected(causal, score, [&](int64_t h, int64_t, int64_t j) { return v[h][j]; });
  }
};

}  // namespace attention_reference
