// RoPE beyond its training length (issue 37), in double: the Llama 3, LongRoPE and YaRN-option
// frequency rules against their formulas written out (Hugging Face's ROPE_INIT_FUNCTIONS are the
// reference in python/test_rope_scaling.py); p-RoPE keeps the highest frequencies, equals RoPE at
// p = 1 and no position at p = 0; ReRoPE and Leaky ReRoPE through the attention module against
// Su's relative position per (i, j) written with loops, causal and bidirectional, in blocks, and
// plain RoPE when the window covers the sequence; log-n's factor per position.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "attention_reference.h"
#include "roformer/common/errors.h"
#include "roformer/config/config_loader.h"
#include "roformer/model/encoder.h"
#include "roformer/model/position/rope_frequencies.h"

namespace rope_extension_test {

using namespace roformer;
using namespace roformer::model;
using namespace attention_reference;
using config::RopeScalingKind;

namespace {

constexpr double kPi = 3.14159265358979323846;

config::RopeConfig scaled(RopeScalingKind kind, double factor, int64_t original) {
  config::RopeConfig c;
  c.scaling.kind = kind;
  c.scaling.factor = factor;
  c.scaling.original_max_positions = original;
  return c;
}

double theta(double base, int64_t i, int64_t d) {
  return std::pow(base, -2.0 * double(i) / double(d));
}

// A tiny causal model (vocabulary 17, hidden 16, 2 heads) without dropout.
config::ModelConfig tiny_causal() {
  config::ModelConfig c;
  c.objective = config::Objective::causal_lm;
  c.vocab_size = 17;
  c.hidden_size = 16;
  c.num_heads = 2;
  c.ffn_size = 32;
  c.hidden_dropout = c.attention_dropout = 0;
  return c;
}

}  // namespace

// Llama 3.1 (factor 8, low 1, high 4, L 8192 as Meta ships it): wavelengths under L/4 = 2048 keep
// theta, over L/1 are divided by 8, in between (L/lambda - 1)/3 blends theta/8 and theta.
TEST(RopeExtension, Llama3FollowsTheWavelengthRule) {
  const int64_t d = 128;
  config::RopeConfig c = scaled(RopeScalingKind::llama3, 8.0, 8192);
  c.base = 500000.0;
  const RopeFrequencies f = rope_frequencies(c, d, 100);
  int kept = 0, divided = 0, blended = 0;
  for (int64_t i = 0; i < d / 2; ++i) {
    const double t = theta(500000.0, i, d), wavelen = 2 * kPi / t;
    double want = t;
    if (wavelen > 8192.0) {
      want = t / 8.0;
      ++divided;
    } else if (wavelen >= 2048.0) {
      const double smooth = (8192.0 / wavelen - 1.0) / 3.0;
      want = (1 - smooth) * t / 8.0 + smooth * t;
      ++blended;
    } else {
      ++kept;
    }
    EXPECT_NEAR(f.inv_freq[i], want, 1e-15 * want) << i;
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);
  EXPECT_EQ(f.magnitude, 1.0);
  EXPECT_EQ(f.position_scale, 1.0);
}

// LongRoPE: theta_i / short_i up to the original length, theta_i / long_i past it, and the
// attention factor sqrt(1 + ln s / ln L) (or the one given).
TEST(RopeExtension, LongRopeChoosesItsFactorsByLength) {
  const int64_t d = 8;
  config::RopeConfig c = scaled(RopeScalingKind::longrope, 4.0, 64);
  c.scaling.short_factor = {1.0, 1.1, 1.3, 2.0};
  c.scaling.long_factor = {1.0, 1.5, 3.0, 6.0};
  for (int64_t length : {int64_t{64}, int64_t{65}}) {
    const RopeFrequencies f = rope_frequencies(c, d, length);
    const auto& factors = length > 64 ? c.scaling.long_factor : c.scaling.short_factor;
    for (int64_t i = 0; i < d / 2; ++i) EXPECT_DOUBLE_EQ(f.inv_freq[i], theta(10000.0, i, d) / factors[i]) << i;
    EXPECT_NEAR(f.magnitude, std::sqrt(1 + std::log(4.0) / std::log(64.0)), 1e-15);
  }
  c.scaling.attention_factor = 1.25;
  EXPECT_EQ(rope_frequencies(c, d, 10).magnitude, 1.25);
}

// YaRN's Hugging Face options: truncate=false keeps the ramp's real-valued ends; mscale and
// mscale_all_dim give the factor (0.1 m ln s + 1) / (0.1 m_all ln s + 1).
TEST(RopeExtension, YarnTruncateAndMscaleOptions) {
  const int64_t d = 64;
  config::RopeConfig c = scaled(RopeScalingKind::yarn, 4.0, 128);
  c.scaling.truncate = false;
  // Ends: 64 ln(128/(64 pi)) / (2 ln 1e4) = -1.565 -> 0 and 64 ln(128/(2 pi)) / (2 ln 1e4) = 10.49.
  const double high = 64.0 * std::log(128.0 / (2 * kPi)) / (2 * std::log(10000.0));
  const RopeFrequencies f = rope_frequencies(c, d, 0);
  for (int64_t i : {0, 3, 10, 11, 30}) {
    const double ramp = std::clamp(double(i) / high, 0.0, 1.0);
    const double t = theta(10000.0, i, d);
    EXPECT_NEAR(f.inv_freq[i], t * (1 - ramp) + t / 4.0 * ramp, 1e-15) << i;
  }
  c.scaling.mscale = 0.707;
  c.scaling.mscale_all_dim = 0.707;
  EXPECT_DOUBLE_EQ(rope_frequencies(c, d, 0).magnitude, 1.0);  // DeepSeek-V3's equal pair cancels
  c.scaling.mscale = 1.0;
  c.scaling.mscale_all_dim = 0.5;
  EXPECT_NEAR(rope_frequencies(c, d, 0).magnitude, (0.1 * std::log(4.0) + 1) / (0.05 * std::log(4.0) + 1), 1e-15);
}

// p-RoPE keeps the highest floor(p d / 2) frequencies (the first pairs) and zeroes the rest.
TEST(RopeExtension, PRopeKeepsTheHighestFrequencies) {
  const int64_t d = 32;
  for (double p : {0.0, 0.25, 0.5, 0.75, 1.0}) {
    config::RopeConfig c;
    c.frequency_fraction = p;
    const RopeFrequencies f = rope_frequencies(c, d, 0);
    const auto kept = static_cast<int64_t>(std::floor(p * d / 2));
    for (int64_t i = 0; i < d / 2; ++i)
      EXPECT_EQ(f.inv_freq[i], i < kept ? theta(10000.0, i, d) : 0.0) << p << " " << i;
  }
}

// At the model: p = 1 is RoPE and p = 0 is NoPE, bitwise (angle 0 rotates by cos 1, sin 0).
TEST(RopeExtension, PRopeAtOneIsRopeAndAtZeroIsNope) {
  const config::ModelConfig c = tiny_causal();
  const torch::Tensor ids = torch::randint(0, 17, {2, 12}, torch::kLong);
  auto out = [&](config::PositionKind kind, double p) {
    config::ModelConfig m = c;
    m.position.kind = kind;
    m.position.rope.frequency_fraction = p;
    EncoderModel model = build_model(m, 3);
    model->eval();
    torch::NoGradGuard no_grad;
    return model->forward({ids});
  };
  EXPECT_TRUE(torch::equal(out(config::PositionKind::rope, 1.0), out(config::PositionKind::rope, 1.0)));
  EXPECT_TRUE(torch::equal(out(config::PositionKind::rope, 0.0), out(config::PositionKind::none, 1.0)));
  EXPECT_FALSE(torch::equal(out(config::PositionKind::rope, 0.5), out(config::PositionKind::none, 1.0)));
  EXPECT_FALSE(torch::equal(out(config::PositionKind::rope, 0.5), out(config::PositionKind::rope, 1.0)));
}

namespace {

config::ModelConfig rerope_config(bool causal, int64_t window, double leak) {
  config::ModelConfig c = small_model(config::PositionKind::rope, causal);
  c.position.rope.mode = window > 0 ? config::RopeMode::rerope : config::RopeMode::rotate;
  c.position.rope.rerope.window = window;
  c.position.rope.rerope.leak = leak;
  return c;
}

// q . R(rel) k for head features q, k [D] with RoPE's interleaved pairs at relative position rel.
double rope_score(const torch::Tensor& q, const torch::Tensor& k, double rel) {
  double s = 0;
  for (int64_t i = 0; i < kD / 2; ++i) {
    const double a = rel * theta(10000.0, i, kD);
    const double q0 = q[2 * i].item<double>(), q1 = q[2 * i + 1].item<double>();
    const double k0 = k[2 * i].item<double>(), k1 = k[2 * i + 1].item<double>();
    // (R_m q).(R_n k) = q.R_{n-m} k: with a = (m - n) theta, cos a (q0 k0 + q1 k1) + sin a (q0 k1 - q1 k0).
    s += std::cos(a) * (q0 * k0 + q1 * k1) + std::sin(a) * (q0 * k1 - q1 * k0);
  }
  return s / std::sqrt(double(kD));
}

// Su's relative position: i - j inside the window, capped (or leaking by 1/leak) past it, both sides.
double rerope_rel(int64_t i, int64_t j, double w, double leak) {
  const double d = double(i - j), a = std::abs(d), sign = d < 0 ? -1.0 : 1.0;
  if (a < w) return d;
  return sign * (leak > 0 ? w + (a - w) / leak : w);
}

}  // namespace

TEST(RopeExtension, ReRopeEqualsSusRelativePositionInDouble) {
  for (bool causal : {true, false})
    for (double leak : {0.0, 3.0}) {
      SCOPED_TRACE(std::string(causal ? "causal" : "bidirectional") + " leak " + std::to_string(leak));
      Fixture f(rerope_config(causal, 2, leak));
      // The fixture's q, k are the projections before RoPE, which is what ReRoPE rotates.
      f.expect_output(causal, f.expected(causal, [&](int64_t h, int64_t i, int64_t j) {
        return rope_score(f.q[h][i], f.k[h][j], rerope_rel(i, j, 2, leak));
      }));
      // A window one wider: different.
      f.expect_output_differs(causal, f.expected(causal, [&](int64_t h, int64_t i, int64_t j) {
        return rope_score(f.q[h][i], f.k[h][j], rerope_rel(i, j, 3, leak));
      }));
    }
}

// A window that covers the whole sequence is plain RoPE (within double rounding: the two paths
// rotate with different code and ReRoPE forms its scores itself).
TEST(RopeExtension, ReRopeWithAWindowPastTheSequenceIsPlainRope) {
  for (bool causal : {true, false}) {
    Fixture plain(rerope_config(causal, 0, 0.0)), wide(rerope_config(causal, kS, 0.0));
    EXPECT_TRUE(torch::allclose(plain.run(causal), wide.run(causal), 1e-12, 1e-12)) << causal;
    Fixture narrow(rerope_config(causal, kS - 2, 0.0));
    EXPECT_FALSE(torch::allclose(plain.run(causal), narrow.run(causal), 1e-6, 1e-6)) << causal;
  }
}

namespace {

config::ModelConfig remap_config(bool causal, config::RopeMode mode) {
  config::ModelConfig c = small_model(config::PositionKind::rope, causal);
  c.position.rope.mode = mode;
  c.position.rope.string.shift_fraction = 0.5;  // S = floor(0.5 x 7) = 3
  c.position.rope.string.local = 1;             // W: d >= 3 becomes d - 2
  c.position.rope.string.attention_factor = 1.2;
  c.position.rope.self_extend.group = 2;
  c.position.rope.self_extend.window = 3;
  c.position.rope.dual_chunk.chunk_size = 4;  // chunks of 4 - 1 = 3 tokens: [0, 3), [3, 6), [6, 7)
  c.position.rope.dual_chunk.local_window = 1;
  return c;
}

// DCA as ChunkLlama's forward (chunkllama_attn_replace.py, no cache) places query i against
// key j: keys at j mod c (k_t); the query at i mod c in its own chunk (q_t), at
// min(i mod c + c, chunk_size) against the previous chunk (qc_t), and against earlier chunks at
// qc_t[c - 1] = min(2c - 1, chunk_size). `inter` overrides that last position (mutations).
double dual_chunk_rel(int64_t i, int64_t j, int64_t chunk_size, int64_t local_window, double inter = -1) {
  const int64_t c = chunk_size - local_window;
  const double key = double(j % c);
  if (i / c == j / c) return double(i % c) - key;
  if (i / c == j / c + 1) return double(std::min(i % c + c, chunk_size)) - key;
  return (inter >= 0 ? inter : double(std::min(2 * c - 1, chunk_size))) - key;
}

// STRING (the paper's Section 4 and the authors' string_for_llama.py): d >= S becomes d - S + W,
// the query rotated to i - S + W against keys in place; mirrored for keys after the query (ours).
double string_rel(int64_t i, int64_t j, int64_t shift, int64_t local) {
  const int64_t d = i - j;
  if (d >= shift) return double(d - shift + local);
  if (-d >= shift) return -double(-d - shift + local);
  return double(d);
}

// Self-Extend (the authors' self_extend_forward): neighbours (d < W) keep i - j; farther keys
// the grouped query position i // G + W - W // G against the key's j // G; mirrored after the query.
double self_extend_rel(int64_t i, int64_t j, int64_t group, int64_t window, int64_t offset) {
  const int64_t d = i - j;
  if (d >= window) return double(i / group + offset - j / group);
  if (-d >= window) return double(i / group - offset - j / group);
  return double(d);
}

}  // namespace

TEST(RopeExtension, StringEqualsItsShiftedPositionsInDouble) {
  for (bool causal : {true, false}) {
    SCOPED_TRACE(causal ? "causal" : "bidirectional");
    Fixture f(remap_config(causal, config::RopeMode::string));
    f.expect_output(causal, f.expected(causal, [&](int64_t h, int64_t i, int64_t j) {
      return 1.44 * rope_score(f.q[h][i], f.k[h][j], string_rel(i, j, 3, 1));
    }));
    // Mutations: W one larger; the logit factor left out.
    f.expect_output_differs(causal, f.expected(causal, [&](int64_t h, int64_t i, int64_t j) {
      return 1.44 * rope_score(f.q[h][i], f.k[h][j], string_rel(i, j, 3, 2));
    }));
    f.expect_output_differs(causal, f.expected(causal, [&](int64_t h, int64_t i, int64_t j) {
      return rope_score(f.q[h][i], f.k[h][j], string_rel(i, j, 3, 1));
    }));
  }
  // W >= S would move positions up: the pass stays plain RoPE (attention factor 1 here).
  config::ModelConfig c = remap_config(true, config::RopeMode::string);
  c.position.rope.string.local = 3;
  c.position.rope.string.attention_factor = 1.0;
  Fixture plain(remap_config(true, config::RopeMode::rotate)), wide(c);
  EXPECT_TRUE(torch::allclose(plain.run(true), wide.run(true), 1e-12, 1e-12));
}

TEST(RopeExtension, SelfExtendEqualsItsGroupedPositionsInDouble) {
  for (bool causal : {true, false}) {
    SCOPED_TRACE(causal ? "causal" : "bidirectional");
    Fixture f(remap_config(causal, config::RopeMode::self_extend));
    f.expect_output(causal, f.expected(causal, [&](int64_t h, int64_t i, int64_t j) {
      return rope_score(f.q[h][i], f.k[h][j], self_extend_rel(i, j, 2, 3, 3 - 3 / 2));
    }));
    // Mutations: the neighbour window one narrower; the shift W - W/G in real numbers (1.5).
    f.expect_output_differs(causal, f.expected(causal, [&](int64_t h, int64_t i, int64_t j) {
      return rope_score(f.q[h][i], f.k[h][j], self_extend_rel(i, j, 2, 2, 3 - 3 / 2));
    }));
    f.expect_output_differs(causal, f.expected(causal, [&](int64_t h, int64_t i, int64_t j) {
      const double rel = self_extend_rel(i, j, 2, 3, 3 - 3 / 2);
      return rope_score(f.q[h][i], f.k[h][j], std::abs(i - j) >= 3 ? rel + (i > j ? -0.5 : 0.5) : rel);
    }));
  }
  // A window past the sequence: plain RoPE.
  config::ModelConfig c = remap_config(true, config::RopeMode::self_extend);
  c.position.rope.self_extend.window = kS;
  Fixture plain(remap_config(true, config::RopeMode::rotate)), wide(c);
  EXPECT_TRUE(torch::allclose(plain.run(true), wide.run(true), 1e-12, 1e-12));
}

TEST(RopeExtension, DualChunkEqualsChunkLlamaInDouble) {
  Fixture f(remap_config(true, config::RopeMode::dual_chunk));
  f.expect_output(true, f.expected(true, [&](int64_t h, int64_t i, int64_t j) {
    return rope_score(f.q[h][i], f.k[h][j], dual_chunk_rel(i, j, 4, 1));
  }));
  // Mutations: earlier chunks' query one position lower; chunks one token longer.
  f.expect_output_differs(true, f.expected(true, [&](int64_t h, int64_t i, int64_t j) {
    return rope_score(f.q[h][i], f.k[h][j], dual_chunk_rel(i, j, 4, 1, 3.0));
  }));
  f.expect_output_differs(true, f.expected(true, [&](int64_t h, int64_t i, int64_t j) {
    return rope_score(f.q[h][i], f.k[h][j], dual_chunk_rel(i, j, 5, 1));
  }));
  // One chunk holding the whole pass: plain RoPE.
  config::ModelConfig c = remap_config(true, config::RopeMode::dual_chunk);
  c.position.rope.dual_chunk.chunk_size = kS + 1;
  Fixture plain(remap_config(true, config::RopeMode::rotate)), wide(c);
  EXPECT_TRUE(torch::allclose(plain.run(true), wide.run(true), 1e-12, 1e-12));
}

// DroPE's temperature beta = 1 + c ln(S / L) past L, 1 within it; through the model it equals the
// plain model with its query projection multiplied by beta (so every logit is), and a natural
// log mutated into log2 must differ.
TEST(RopeExtension, DropeTemperatureMultipliesEveryLogitPastTheLength) {
  EXPECT_DOUBLE_EQ(drope_scale(512, 128, 0.4), 1.0 + 0.4 * std::log(4.0));
  EXPECT_DOUBLE_EQ(drope_scale(128, 128, 0.4), 1.0);
  EXPECT_DOUBLE_EQ(drope_scale(64, 128, 0.4), 1.0);
  config::ModelConfig c = small_model(config::PositionKind::rope, true);
  c.vocab_size = 13;
  c.hidden_dropout = 0;
  c.attention_scale_length = 4;
  c.attention_scale_factor = 0.5;
  config::ModelConfig tempered = c;
  tempered.attention_scale = config::AttentionScale::drope;
  auto build = [](const config::ModelConfig& m) {
    EncoderModel model = build_model(m, 3);
    model->to(torch::kFloat64);
    model->eval();
    return model;
  };
  EncoderModel with = build(tempered), plain = build(c), scaled = build(c), mutated = build(c);
  const torch::Tensor ids = torch::randint(0, 13, {2, 12}, torch::kLong);
  torch::NoGradGuard no_grad;
  const double beta = 1.0 + 0.5 * std::log(12.0 / 4.0), wrong = 1.0 + 0.5 * std::log2(12.0 / 4.0);
  for (auto [model, factor] : {std::pair{&scaled, beta}, std::pair{&mutated, wrong}})
    for (const auto& layer : *(*model)->encoder->layer) {
      auto& q = layer->as<EncoderLayer>()->attention->self->query;
      q->weight.mul_(factor);
      q->bias.mul_(factor);
    }
  const torch::Tensor got = with->forward({ids});
  EXPECT_TRUE(torch::allclose(got, scaled->forward({ids}), 1e-10, 1e-10));
  EXPECT_GT((got - mutated->forward({ids})).abs().max().item<double>(), 1e-6);
  const torch::Tensor short_ids = ids.narrow(1, 0, 4);  // S = L: no temperature
  EXPECT_TRUE(torch::allclose(with->forward({short_ids}), plain->forward({short_ids}), 1e-12, 1e-12));
}

TEST(RopeExtension, LognFactorPerPosition) {
  const torch::Tensor p = torch::arange(0, 40, torch::kLong);
  const torch::Tensor s = logn_scale(p, 16);
  for (int64_t i = 0; i < 40; ++i)
    EXPECT_DOUBLE_EQ(s[i].item<double>(), std::max(1.0, std::log(double(i + 1)) / std::log(16.0))) << i;
  EXPECT_TRUE((s.narrow(0, 0, 16) == 1.0).all().item<bool>());  // 1 for every position inside L
  EXPECT_GT(s[39].item<double>(), 1.0);
}

// Llama 4's temperature as transformers' Llama4TextAttention writes it:
// log1p(floor((positions + 1) / floor_scale)) * attn_scale + 1, here with floor_scale 4.
TEST(RopeExtension, Llama4TemperaturePerPosition) {
  const torch::Tensor p = torch::arange(0, 40, torch::kLong);
  const torch::Tensor s = llama4_scale(p, 4.0, 0.1);
  for (int64_t i = 0; i < 40; ++i)
    EXPECT_DOUBLE_EQ(s[i].item<double>(), std::log(std::floor((double(i) + 1.0) / 4.0) + 1.0) * 0.1 + 1.0) << i;
  EXPECT_TRUE((s.narrow(0, 0, 3) == 1.0).all().item<bool>());  // 1 until the first floor step
  EXPECT_DOUBLE_EQ(s[3].item<double>(), 1.0 + 0.1 * std::log(2.0));
}

// logn_past_training changes nothing in training and everything past L in evaluation; inside L
// both are the unscaled model, bitwise.
TEST(RopeExtension, LognScalesOnlyPastTheLengthAndOnlyWhenAsked) {
  config::ModelConfig c = tiny_causal();
  c.attention_scale_length = 8;
  auto out = [&](config::AttentionScale scale, int64_t S, bool train) {
    config::ModelConfig m = c;
    m.attention_scale = scale;
    EncoderModel model = build_model(m, 3);
    model->train(train);
    torch::NoGradGuard no_grad;
    torch::manual_seed(1);
    return model->forward({torch::randint(0, 17, {1, S}, torch::kLong)});
  };
  using config::AttentionScale;
  EXPECT_TRUE(torch::equal(out(AttentionScale::logn, 8, false), out(AttentionScale::none, 8, false)));
  EXPECT_FALSE(torch::equal(out(AttentionScale::logn, 20, false), out(AttentionScale::none, 20, false)));
  EXPECT_TRUE(torch::equal(out(AttentionScale::logn_past_training, 20, true), out(AttentionScale::none, 20, true)));
  EXPECT_TRUE(torch::equal(out(AttentionScale::logn_past_training, 20, false), out(AttentionScale::logn, 20, false)));
}

TEST(RopeExtension, RefusedSettingsNameTheKeysAndTheReason) {
  auto error = [](const std::vector<std::string>& sets) -> std::string {
    try {
      config::LoadedConfig loaded;
      config::apply_overrides(loaded, sets);
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error({"model.position.rope.scaling.kind=longrope", "model.position.rope.scaling.short_factor=1,2"})
                .find("one factor per rotated pair"),
            std::string::npos);
  EXPECT_NE(error({"model.position.rope.scaling.kind=llama3", "model.position.rope.scaling.high_freq_factor=1"})
                .find("high_freq_factor"),
            std::string::npos);
  EXPECT_NE(
      error({"model.position.kind=xpos", "model.position.rope.mode=rerope", "model.position.rope.rerope.window=16"})
          .find("rope.mode"),
      std::string::npos);
  EXPECT_NE(error({"model.attention=linear", "model.position.rope.mode=rerope", "model.position.rope.rerope.window=16"})
                .find("model.attention"),
            std::string::npos);
  // ReRoPE is a choice with its window: a window alone, or the choice without one, is refused.
  EXPECT_NE(error({"model.position.rope.rerope.window=16"}).find("model.position.rope.mode=rerope"), std::string::npos);
  EXPECT_NE(error({"model.position.rope.mode=rerope"}).find("model.position.rope.rerope.window"), std::string::npos);
  EXPECT_NE(error({"model.attention=linear", "model.attention_scale=logn"}).find("model.attention_scale"),
            std::string::npos);
  EXPECT_NE(error({"model.attention_scale=logn", "model.attention_scale_length=1"}).find("log(L)"), std::string::npos);
  EXPECT_NE(error({"model.position.rope.frequency_fraction=1.5"}).find("frequency_fraction"), std::string::npos);
}

}  // namespace rope_extension_test
