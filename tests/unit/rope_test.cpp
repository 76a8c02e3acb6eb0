// RoPE properties and reference values, in double precision: relative-position dependence,
// norm preservation, interleaved vs half pairing, partial rotary, the frequency formulas of
// every scaling kind against hand-computed values, Hugging Face's rotary test values, and
// RoFormer's long-term decay bound (§3.4.3).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <complex>

#include "roformer/model/position/rope.h"
#include "roformer/model/position/rope_frequencies.h"
#include "roformer/model/position/rope_reference.h"

namespace rope_test {

using namespace roformer;
using namespace roformer::model;
using config::RopePairing;
using config::RopeScalingKind;

namespace {

const auto kF64 = torch::dtype(torch::kFloat64);

config::RopeConfig rope_config(double base = 10000.0) {
  config::RopeConfig c;
  c.base = base;
  c.scaling.original_max_positions = 128;
  return c;
}

// Rotates x [1, 1, 1, D] as if at `position`.
torch::Tensor rotate_at(const torch::Tensor& x, int64_t position, const RopeFrequencies& f, RopePairing pairing,
                        int64_t rotary_dim) {
  return rope_reference(x, torch::tensor({position}, torch::kLong), f, pairing, rotary_dim);
}

}  // namespace

TEST(Rope, ScoresDependOnlyOnRelativePosition) {
  torch::manual_seed(0);
  const int64_t D = 64;
  const RopeFrequencies f = rope_frequencies(rope_config(), D, 0);
  for (RopePairing pairing : {RopePairing::interleaved, RopePairing::half}) {
    const torch::Tensor q = torch::randn({1, 1, 1, D}, kF64), k = torch::randn({1, 1, 1, D}, kF64);
    for (int64_t m : {0, 3, 17}) {
      for (int64_t n : {0, 5, 40}) {
        const double base_score =
            (rotate_at(q, m, f, pairing, D) * rotate_at(k, n, f, pairing, D)).sum().item<double>();
        for (int64_t shift : {0, 1, 1000, 10000}) {
          const double shifted =
              (rotate_at(q, m + shift, f, pairing, D) * rotate_at(k, n + shift, f, pairing, D)).sum().item<double>();
          EXPECT_NEAR(shifted, base_score, 1e-10) << "m=" << m << " n=" << n << " shift=" << shift;
        }
      }
    }
  }
}

TEST(Rope, PreservesNormsAndIsIdentityAtPositionZero) {
  torch::manual_seed(1);
  const int64_t D = 32;
  const RopeFrequencies f = rope_frequencies(rope_config(), D, 0);
  const torch::Tensor x = torch::randn({2, 3, 7, D}, kF64);
  const torch::Tensor pos = torch::arange(100000, 100007, torch::kLong);
  for (RopePairing pairing : {RopePairing::interleaved, RopePairing::half}) {
    const torch::Tensor y = rope_reference(x, pos, f, pairing, D);
    EXPECT_LT((y.norm(2, -1) - x.norm(2, -1)).abs().max().item<double>(), 1e-12);
    const torch::Tensor y0 = rope_reference(x, torch::zeros({7}, torch::kLong), f, pairing, D);
    EXPECT_TRUE(torch::equal(y0, x));
  }
}

TEST(Rope, InterleavedAndHalfAgreeUnderThePairPermutation) {
  torch::manual_seed(2);
  const int64_t D = 16, half = D / 2;
  const RopeFrequencies f = rope_frequencies(rope_config(), D, 0);
  // perm maps the half layout to the interleaved one: interleaved feature 2i <- half i,
  // interleaved 2i+1 <- half i + D/2.
  std::vector<int64_t> perm(D);
  for (int64_t i = 0; i < half; ++i) {
    perm[2 * i] = i;
    perm[2 * i + 1] = i + half;
  }
  const torch::Tensor index = torch::tensor(perm, torch::kLong);
  const torch::Tensor x_half = torch::randn({2, 2, 9, D}, kF64);
  const torch::Tensor pos = torch::arange(9, torch::kLong) * 37;
  const torch::Tensor via_half = rope_reference(x_half, pos, f, RopePairing::half, D).index_select(-1, index);
  const torch::Tensor via_interleaved =
      rope_reference(x_half.index_select(-1, index), pos, f, RopePairing::interleaved, D);
  EXPECT_LT((via_half - via_interleaved).abs().max().item<double>(), 1e-13);
}

TEST(Rope, PartialRotaryLeavesTheTailUntouched) {
  torch::manual_seed(3);
  const int64_t D = 24, R = 8;
  const RopeFrequencies f = rope_frequencies(rope_config(), R, 0);
  const torch::Tensor x = torch::randn({1, 2, 5, D}, kF64);
  for (RopePairing pairing : {RopePairing::interleaved, RopePairing::half}) {
    const torch::Tensor y = rope_reference(x, torch::arange(5, torch::kLong) + 3, f, pairing, R);
    EXPECT_TRUE(torch::equal(y.narrow(-1, R, D - R), x.narrow(-1, R, D - R)));
    EXPECT_FALSE(torch::allclose(y.narrow(-1, 0, R), x.narrow(-1, 0, R)));
  }
}

TEST(Rope, FrequenciesMatchHandComputedFormulas) {
  const int64_t D = 64;
  auto theta = [&](double base, int64_t i) { return std::pow(base, -2.0 * i / D); };
  config::RopeConfig c = rope_config(500.0);
  RopeFrequencies f = rope_frequencies(c, D, 0);
  for (int64_t i : {0, 1, 31}) EXPECT_DOUBLE_EQ(f.inv_freq[i], theta(500.0, i));
  EXPECT_DOUBLE_EQ(f.inv_freq[1], std::pow(500.0, -1.0 / 32.0));

  c = rope_config();
  c.scaling.kind = RopeScalingKind::linear;
  c.scaling.factor = 4.0;
  f = rope_frequencies(c, D, 0);
  EXPECT_DOUBLE_EQ(f.position_scale, 0.25);
  EXPECT_DOUBLE_EQ(f.inv_freq[7], theta(10000.0, 7));

  c.scaling.kind = RopeScalingKind::ntk;
  f = rope_frequencies(c, D, 0);
  const double ntk_base = 10000.0 * std::pow(4.0, 64.0 / 62.0);  // base * s^(d/(d-2))
  EXPECT_NEAR(f.inv_freq[5], theta(ntk_base, 5), 1e-15);
  EXPECT_DOUBLE_EQ(f.inv_freq[0], 1.0);
  // By design the lowest-frequency pair (i = d/2 - 1) is interpolated by exactly 1/s.
  EXPECT_NEAR(f.inv_freq[31] / theta(10000.0, 31), 1.0 / 4.0, 1e-12);

  c.scaling.kind = RopeScalingKind::dynamic_ntk;
  f = rope_frequencies(c, D, 128);  // within the training length: unscaled
  EXPECT_DOUBLE_EQ(f.inv_freq[9], theta(10000.0, 9));
  f = rope_frequencies(c, D, 256);  // 2L with s=4: effective factor 4*256/128 - 3 = 5
  EXPECT_NEAR(f.inv_freq[9], theta(10000.0 * std::pow(5.0, 64.0 / 62.0), 9), 1e-15);

  // YaRN, d=64, base 1e4, L=128, s=4, beta 32/1: the ramp runs from pair 0 to pair 11
  // (floor(64 ln(128/(64 pi)) / (2 ln 1e4)) = -2 -> 0, ceil(64 ln(128/(2 pi)) / (2 ln 1e4)) = 11).
  c.scaling.kind = RopeScalingKind::yarn;
  f = rope_frequencies(c, D, 0);
  EXPECT_DOUBLE_EQ(f.inv_freq[0], theta(10000.0, 0));
  const double r5 = 5.0 / 11.0;
  EXPECT_NEAR(f.inv_freq[5], theta(10000.0, 5) * (1 - r5) + theta(10000.0, 5) / 4.0 * r5, 1e-15);
  EXPECT_NEAR(f.inv_freq[11], theta(10000.0, 11) / 4.0, 1e-15);
  EXPECT_NEAR(f.inv_freq[20], theta(10000.0, 20) / 4.0, 1e-15);
  EXPECT_NEAR(f.magnitude, 0.1 * std::log(4.0) + 1.0, 1e-15);
  c.scaling.attention_factor = 1.5;
  EXPECT_DOUBLE_EQ(rope_frequencies(c, D, 0).magnitude, 1.5);
}

TEST(Rope, RotationAnglesFollowTheFrequencies) {
  // Each pair (1, 0) rotated to position p becomes magnitude * (cos a, sin a),
  // a = p * position_scale * inv_freq[i], for every scaling kind.
  const int64_t D = 16;
  for (RopeScalingKind kind : {RopeScalingKind::none, RopeScalingKind::linear, RopeScalingKind::ntk,
                               RopeScalingKind::dynamic_ntk, RopeScalingKind::yarn}) {
    config::RopeConfig c = rope_config();
    c.scaling.kind = kind;
    c.scaling.factor = 2.0;
    const RopeFrequencies f = rope_frequencies(c, D, 300);
    torch::Tensor x = torch::zeros({1, 1, 1, D}, kF64);
    x.index_put_({0, 0, 0, torch::indexing::Slice(0, D, 2)}, 1.0);
    const int64_t p = 777;
    const torch::Tensor y = rotate_at(x, p, f, RopePairing::interleaved, D);
    for (int64_t i = 0; i < D / 2; ++i) {
      const double a = p * f.position_scale * f.inv_freq[i];
      EXPECT_NEAR(y[0][0][0][2 * i].item<double>(), f.magnitude * std::cos(a), 1e-12);
      EXPECT_NEAR(y[0][0][0][2 * i + 1].item<double>(), f.magnitude * std::sin(a), 1e-12);
    }
  }
}

TEST(Rope, LinearScalingWithFactorOneEqualsNone) {
  torch::manual_seed(4);
  config::RopeConfig none = rope_config(), linear = rope_config();
  linear.scaling.kind = RopeScalingKind::linear;
  linear.scaling.factor = 1.0;
  const torch::Tensor x = torch::randn({1, 2, 6, 8}, kF64), pos = torch::arange(6, torch::kLong);
  EXPECT_TRUE(torch::equal(rope_reference(x, pos, rope_frequencies(none, 8, 6), RopePairing::interleaved, 8),
                           rope_reference(x, pos, rope_frequencies(linear, 8, 6), RopePairing::interleaved, 8)));
}

TEST(Rope, MatchesHuggingFaceRoFormerRotaryTest) {
  // transformers tests/models/roformer: q = arange(2*12*16*64)/100 as (2,12,16,64), k = -q,
  // positions 0..15, head dim 64; expected q'[0,0,1:3,:8] (4 decimals).
  const torch::Tensor q = torch::arange(2 * 12 * 16 * 64, kF64).reshape({2, 12, 16, 64}) / 100.0;
  const RopeFrequencies f = rope_frequencies(rope_config(), 64, 16);
  const torch::Tensor pos = torch::arange(16, torch::kLong);
  const torch::Tensor rq = rope_reference(q, pos, f, RopePairing::interleaved, 64);
  const torch::Tensor rk = rope_reference(-q, pos, f, RopePairing::interleaved, 64);
  const std::vector<double> row1{-0.2012, 0.8897, 0.0263, 0.9401, 0.2074, 0.9463, 0.3481, 0.9343};
  const std::vector<double> row2{-1.7057, 0.6271, -1.2145, 1.3897, -0.6303, 1.7647, -0.1173, 1.8985};
  for (int64_t j = 0; j < 8; ++j) {
    EXPECT_NEAR(rq[0][0][1][j].item<double>(), row1[j], 1e-4);
    EXPECT_NEAR(rq[0][0][2][j].item<double>(), row2[j], 1e-4);
  }
  EXPECT_TRUE(torch::allclose(rk, -rq));
}

TEST(Rope, LongTermDecayBoundDecreasesWithDistance) {
  // RoFormer §3.4.3: |sum_j h_j e^{i r theta_j}| <= max_j |h_{j+1} - h_j| * sum_j |S_{j+1}|,
  // S_j = sum_{k<j} e^{i r theta_k}; the relative bound mean_j |S_j| decays with r on average.
  const int64_t D = 128, half = D / 2;
  const RopeFrequencies f = rope_frequencies(rope_config(), D, 0);
  auto bound_terms = [&](int64_t r) {
    double sum = 0;
    std::complex<double> s = 0;
    for (int64_t j = 0; j < half; ++j) {
      s += std::polar(1.0, r * f.inv_freq[j]);
      sum += std::abs(s);
    }
    return sum;
  };
  auto bucket_mean = [&](int64_t lo, int64_t hi) {
    double total = 0;
    for (int64_t r = lo; r < hi; ++r) total += bound_terms(r) / half;
    return total / static_cast<double>(hi - lo);
  };
  const double near = bucket_mean(1, 16), mid = bucket_mean(16, 128), far = bucket_mean(128, 1024);
  EXPECT_GT(near, mid);
  EXPECT_GT(mid, far);
  EXPECT_GT(near, 2.0 * far);
  // The bound holds for random h at every distance.
  torch::manual_seed(5);
  const torch::Tensor h = torch::randn({half, 2}, kF64);
  for (int64_t r : {1, 10, 100, 1000, 5000}) {
    std::complex<double> score = 0;
    double max_step = 0;
    for (int64_t j = 0; j < half; ++j) {
      const std::complex<double> hj(h[j][0].item<double>(), h[j][1].item<double>());
      score += hj * std::polar(1.0, r * f.inv_freq[j]);
      if (j + 1 < half) {
        const std::complex<double> hn(h[j + 1][0].item<double>(), h[j + 1][1].item<double>());
        max_step = std::max(max_step, std::abs(hn - hj));
      }
    }
    // Abel summation with h_{d/2} = 0 adds |h_last| * |S_{d/2}|, within max over the extended steps.
    const std::complex<double> last(h[half - 1][0].item<double>(), h[half - 1][1].item<double>());
    max_step = std::max(max_step, std::abs(last));
    EXPECT_LE(std::abs(score), max_step * bound_terms(r) + 1e-9) << "r=" << r;
  }
}

TEST(Rope, ModuleRotatesQueryKeyAndOptionallyValue) {
  torch::manual_seed(6);
  config::RopeConfig c = rope_config();
  c.rotary_dim = 8;
  RopeImpl rope(c, 8);
  torch::Tensor q = torch::randn({1, 2, 4, 8}, kF64), k = torch::randn({1, 2, 4, 8}, kF64),
                v = torch::randn({1, 2, 4, 8}, kF64);
  const torch::Tensor v0 = v.clone();
  rope.rotate(q, k, v, torch::arange(4, torch::kLong));
  EXPECT_TRUE(torch::equal(v, v0));
  c.rotate_value = true;
  RopeImpl rope_v(c, 8);
  rope_v.rotate(q, k, v, torch::arange(4, torch::kLong));
  EXPECT_FALSE(torch::equal(v, v0));
}

TEST(Rope, ModuleCosSinTableEqualsComputingAcrossLengths) {
  // The module's cached (cos, sin) table against the kernel computing them: the same bits in
  // float32 and bf16, with dynamic NTK (whose frequencies change with the length, so the table
  // must be rebuilt when the length does) and linear scaling folded into the table.
  for (auto kind : {RopeScalingKind::dynamic_ntk, RopeScalingKind::linear})
    for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
      config::RopeConfig c = rope_config();
      c.scaling.kind = kind;
      c.scaling.factor = 4.0;
      c.scaling.original_max_positions = 8;
      config::RopeConfig computed_config = c;
      computed_config.cos_sin_table = false;
      RopeImpl tabled(c, 16), computed(computed_config, 16);
      for (int64_t length : {8, 32, 8}) {
        SCOPED_TRACE(std::string(c10::toString(dtype)) + " length " + std::to_string(length));
        torch::manual_seed(length);
        const torch::Tensor q = torch::randn({2, 3, length, 16}).to(dtype),
                            k = torch::randn({2, 3, length, 16}).to(dtype);
        torch::Tensor q1 = q, k1 = k, v1, q2 = q, k2 = k, v2;
        tabled.rotate(q1, k1, v1, torch::arange(length, torch::kLong));
        computed.rotate(q2, k2, v2, torch::arange(length, torch::kLong));
        EXPECT_TRUE(torch::equal(q1, q2));
        EXPECT_TRUE(torch::equal(k1, k2));
        EXPECT_FALSE(torch::equal(q1, q));
      }
    }
}

}  // namespace rope_test
