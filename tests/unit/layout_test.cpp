// Per-layer layouts: local windows against loops over queries and keys, the bands of keys that
// long windowed passes attend to against the whole mask, a sliding window against the same
// model on the truncated context, and a layout's kinds against their plain models chained by
// hand. (The presets' layer patterns and masks are held to transformers in python/test_layouts.py;
// causal leak, padding, finite-difference gradients and parameter counts run the presets in
// model_test.)
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "attention_reference.h"
#include "roformer/config/layer_layout.h"
#include "roformer/model/encoder.h"

namespace layout_test {

using namespace roformer;
using namespace roformer::model;
using namespace attention_reference;
using config::PositionKind;

namespace {

// Whether key j is inside query i's window (written from the definitions, not from the mask).
bool in_window(int64_t i, int64_t j, int64_t W, bool chunked, bool causal) {
  if (causal && j > i) return false;
  if (chunked) return j / W == i / W;
  return causal ? i - j < W : std::abs(i - j) <= W;
}

// The module's attention output for x [1, S, hidden] under a local window, the mask built as
// the encoder builds it (`limit`: where row blocks start).
torch::Tensor attend(Attention& attn, const torch::Tensor& x, bool causal, LocalWindow w,
                     double limit = AttentionMask::kWholeMaskBytes) {
  const int64_t S = x.size(1);
  AttentionContext ctx;
  ctx.positions = torch::arange(S, torch::kLong);
  ctx.causal = causal;
  ctx.mask = AttentionMask({}, {}, causal, S, torch::kFloat64, torch::kCPU, false, limit, w);
  torch::NoGradGuard no_grad;
  return attn->attend(x, ctx);
}

config::ModelConfig one_layer(PositionKind kind, bool causal) {
  config::ModelConfig c = small_model(kind, causal);
  c.num_layers = 1;
  c.vocab_size = 13;
  c.hidden_dropout = 0;
  c.layer_norm_eps = 1e-5;
  return c;
}

EncoderModel build_double(const config::ModelConfig& c) {
  EncoderModel m = build_model(c, 5);
  m->to(torch::kFloat64);
  m->eval();
  return m;
}

// `c` with a custom layout: every layer local (pattern L), a window of `window`.
config::ModelConfig windowed(config::ModelConfig c, int64_t window, config::WindowKind kind) {
  config::Config full;
  full.model = c;
  full.model.layout.preset = config::LayoutPreset::custom;
  full.model.layout.pattern = "L";
  full.model.layout.local.window_kind = kind;
  full.model.layout.local.window = window;
  config::resolve_layout(full);
  return full.model;
}

}  // namespace

TEST(Layout, WindowedAttentionFollowsLoops) {
  for (bool causal : {true, false})
    for (bool chunked : {false, true})
      for (int64_t W : {1, 2, 3}) {
        SCOPED_TRACE((causal ? "causal" : "bidirectional") + std::string(chunked ? " chunked " : " sliding ") +
                     std::to_string(W));
        Fixture f(small_model(PositionKind::none, causal));
        auto window_score = [&](int64_t W2) {
          return [&, W2](int64_t h, int64_t i, int64_t j) {
            const double s = dotd(f.q[h][i], f.k[h][j]) / std::sqrt(double(kD));
            return in_window(i, j, W2, chunked, causal) ? s : -1e300;
          };
        };
        const torch::Tensor got = attend(f.attn, f.x, causal, {W, chunked});
        const torch::Tensor want = f.expected(causal, window_score(W));
        EXPECT_TRUE(torch::allclose(got, want, 1e-10, 1e-10)) << (got - want).abs().max();
        const torch::Tensor mutated = f.expected(causal, window_score(W + 1));  // one more key must show
        EXPECT_GT((got - mutated).abs().max().item<double>(), 1e-6);
      }
}

// Past four bands of rows a windowed mask gives each block of queries only the keys its window
// reaches; the result equals SDPA over every key with the whole mask.
TEST(Layout, BandsOfKeysEqualTheWholeMask) {
  const int64_t S = 900;
  for (bool causal : {true, false})
    for (LocalWindow w : {LocalWindow{10, false}, LocalWindow{50, true}, LocalWindow{200, false}}) {
      SCOPED_TRACE((causal ? "causal " : "bidirectional ") + std::to_string(w.size) + (w.chunked ? " chunked" : ""));
      const config::ModelConfig c = small_model(PositionKind::none, causal);
      torch::manual_seed(3);
      Attention attn(c, make_position_encoding(c));
      attn->to(torch::kFloat64);
      attn->eval();
      const torch::Tensor x = torch::randn({1, S, kHidden}, kDouble);
      const AttentionMask mask({}, {}, causal, S, torch::kFloat64, torch::kCPU, false, AttentionMask::kWholeMaskBytes,
                               w);
      EXPECT_LT(mask.block_rows(), S);  // bands in use
      torch::NoGradGuard no_grad;
      auto heads = [&](const torch::nn::Linear& l) {
        return torch::nn::functional::linear(x, l->weight, l->bias).view({1, S, kHeads, kD}).transpose(1, 2);
      };
      const torch::Tensor ctx = at::scaled_dot_product_attention(heads(attn->self->query), heads(attn->self->key),
                                                                 heads(attn->self->value), mask.whole());
      const torch::Tensor want = torch::nn::functional::linear(ctx.transpose(1, 2).reshape({1, S, kHidden}),
                                                               attn->output->dense->weight, attn->output->dense->bias);
      const torch::Tensor got = attend(attn, x, causal, w);
      EXPECT_TRUE(torch::allclose(got, want, 1e-10, 1e-10)) << (got - want).abs().max();
    }
}

TEST(Layout, KeySpanHoldsEveryVisibleKey) {
  for (int64_t S : {5, 17, 40})
    for (int64_t W : {1, 3, 8})
      for (bool chunked : {false, true})
        for (bool causal : {false, true}) {
          const AttentionMask mask({}, {}, causal, S, torch::kFloat32, torch::kCPU, false,
                                   AttentionMask::kWholeMaskBytes, {W, chunked});
          if (!mask.defined()) {  // a window of S keys or more, bidirectional: nothing hidden
            EXPECT_GE(W, S);
            continue;
          }
          for (int64_t begin = 0; begin < S; begin += 4) {
            const int64_t end = std::min(S, begin + 4);
            const auto [first, last] = mask.key_span(begin, end);
            const torch::Tensor seen = (mask.rows(begin, end).view({-1, S}) > -1e29).any(0);  // [S]
            for (int64_t j = 0; j < S; ++j) {
              if (!seen[j].item<bool>()) continue;
              EXPECT_TRUE(first <= j && j < last) << "S " << S << " W " << W << " rows " << begin << " key " << j;
            }
          }
        }
}

// A one-layer causal RoPE model with a sliding window of W: its output at position i is the
// plain model's at the last position of tokens i - W + 1 .. i (RoPE is relative, so the
// truncated context is the same function). Long enough for the bands.
TEST(Layout, SlidingWindowEqualsTheTruncatedContext) {
  const config::ModelConfig plain = one_layer(PositionKind::rope, true);
  for (int64_t W : {1, 5}) {
    SCOPED_TRACE(W);
    EncoderModel m = build_double(windowed(plain, W, config::WindowKind::sliding));
    EncoderModel reference = build_double(plain);
    torch::manual_seed(9);
    const torch::Tensor ids = torch::randint(0, 13, {1, 600}, torch::kLong);
    torch::NoGradGuard no_grad;
    const torch::Tensor out = m->forward({ids});
    for (int64_t i : {0, 3, 4, 5, 130, 599}) {
      const int64_t first = std::max<int64_t>(0, i - W + 1);
      const torch::Tensor want = reference->forward({ids.narrow(1, first, i - first + 1)})[0][i - first];
      EXPECT_TRUE(torch::allclose(out[0][i], want, 1e-10, 1e-10)) << "position " << i;
    }
  }
}

// A layout's layers run as the plain models of their kinds: layer 0 as a RoPE model of base 500,
// layer 1 as a NoPE model with Llama 4's temperature, chained by hand with the same weights.
TEST(Layout, KindsRunAsTheirPlainModels) {
  config::ModelConfig c = one_layer(PositionKind::rope, true);
  c.num_layers = 2;
  c.attention_scale_floor = 2;
  c.attention_scale_factor = 0.5;
  config::Config full;
  full.model = c;
  full.model.layout.preset = config::LayoutPreset::custom;
  full.model.layout.pattern = "LG";
  full.model.layout.local.window_kind = config::WindowKind::none;
  full.model.layout.local.rope_base = 500;
  full.model.layout.global.position = config::LayerPosition::none;
  full.model.layout.global.temperature = config::LayerTemperature::llama4;
  config::resolve_layout(full);
  EncoderModel m = build_double(full.model);

  config::ModelConfig local = c, global = c;
  local.position.rope.base = 500;
  global.position.kind = PositionKind::none;
  global.attention_scale = config::AttentionScale::llama4;
  EncoderModel as_local = build_double(local), as_global = build_double(global);
  {
    torch::NoGradGuard no_grad;
    for (EncoderModel* plain : {&as_local, &as_global}) {
      auto theirs = (*plain)->named_parameters();
      for (const auto& p : m->named_parameters()) theirs[p.key()].copy_(p.value());
    }
  }
  torch::manual_seed(4);
  const torch::Tensor ids = torch::randint(0, 13, {2, 12}, torch::kLong);
  torch::NoGradGuard no_grad;
  const torch::Tensor positions = torch::arange(12, torch::kLong);
  torch::Tensor x = m->embeddings->LayerNorm->forward(m->embeddings->word_embeddings->forward(ids));
  x = as_local->encoder->layer[0]->as<EncoderLayer>()->forward(
      x, as_local->attention_context({ids}, positions, torch::kFloat64));
  x = as_global->encoder->layer[1]->as<EncoderLayer>()->forward(
      x, as_global->attention_context({ids}, positions, torch::kFloat64));
  const torch::Tensor got = m->forward({ids});
  EXPECT_TRUE(torch::allclose(got, x, 1e-12, 1e-12)) << (got - x).abs().max();
  // The kinds matter: the same weights with every layer as the local kind give another output.
  torch::Tensor y = m->embeddings->LayerNorm->forward(m->embeddings->word_embeddings->forward(ids));
  for (int64_t i = 0; i < 2; ++i)
    y = as_local->encoder->layer[i]->as<EncoderLayer>()->forward(
        y, as_local->attention_context({ids}, positions, torch::kFloat64));
  EXPECT_GT((got - y).abs().max().item<double>(), 1e-6);
}

// model.layout.<kind>.rope_scaling off: those layers rotate without the model's scaling (Gemma 3
// 4B+'s sliding layers) at the model's context, the other kind keeps it; the two kinds get RoPE
// modules of their own, so the model's output changes with the switch.
TEST(Layout, RopeScalingOffLeavesThatKindUnscaled) {
  config::Config full;
  full.model = one_layer(PositionKind::rope, true);
  full.model.num_layers = 2;
  full.model.position.rope.scaling.kind = config::RopeScalingKind::linear;
  full.model.position.rope.scaling.factor = 4;
  full.model.position.rope.scaling.original_max_positions = 6;
  full.model.layout.preset = config::LayoutPreset::custom;
  full.model.layout.pattern = "LG";
  full.model.layout.local.window_kind = config::WindowKind::none;
  config::Config off = full;
  off.model.layout.local.rope_scaling = config::LayerToggle::off;
  config::resolve_layout(full);
  config::resolve_layout(off);
  const config::ModelConfig local = config::layer_model(off.model, false),
                            global = config::layer_model(off.model, true);
  EXPECT_EQ(local.position.rope.scaling.kind, config::RopeScalingKind::none);
  EXPECT_EQ(local.position.rope.scaling.original_max_positions, 6);
  EXPECT_EQ(global.position.rope.scaling.kind, config::RopeScalingKind::linear);
  EXPECT_EQ(config::layer_model(full.model, false).position.rope.scaling.kind, config::RopeScalingKind::linear);
  EXPECT_NE(config::describe_layout(off.model).find("unscaled"), std::string::npos)
      << config::describe_layout(off.model);
  EncoderModel scaled = build_double(full.model), unscaled = build_double(off.model);
  {
    torch::NoGradGuard no_grad;
    auto theirs = unscaled->named_parameters();
    for (const auto& p : scaled->named_parameters()) theirs[p.key()].copy_(p.value());
  }
  torch::manual_seed(5);
  const torch::Tensor ids = torch::randint(0, 13, {1, 12}, torch::kLong);
  torch::NoGradGuard no_grad;
  EXPECT_GT((scaled->forward({ids}) - unscaled->forward({ids})).abs().max().item<double>(),
            1e-8);  // double: 0 if alike
}

}  // namespace layout_test
