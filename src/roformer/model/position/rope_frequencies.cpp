// Inverse frequencies for every RoPE scaling kind. Formulas follow the papers (RoFormer eq. 15;
// Chen et al. 2023 PI; bloc97's NTK-aware base change; Peng et al. 2023 YaRN) and match the
// conventions of Hugging Face's rope utilities so checkpoints and numbers are comparable.
#include "roformer/model/position/rope_frequencies.h"

#include <algorithm>
#include <cmath>

namespace roformer::model {
namespace {

constexpr double kPi = 3.14159265358979323846;

std::vector<double> plain(double base, int64_t dim) {
  std::vector<double> f(dim / 2);
  for (int64_t i = 0; i < dim / 2; ++i) f[i] = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(dim));
  return f;
}

// NTK-aware: keep positions, stretch the base so the lowest frequency is interpolated by s
// while the highest is (almost) unchanged: base' = base * s^(d / (d - 2)).
double ntk_base(double base, double s, int64_t dim) {
  if (dim <= 2) return base * s;
  return base * std::pow(s, static_cast<double>(dim) / static_cast<double>(dim - 2));
}

// YaRN's dimension index at which a pair completes `rotations` turns over the original length.
double yarn_correction_dim(double rotations, int64_t dim, double base, double original_len) {
  return static_cast<double>(dim) * std::log(original_len / (rotations * 2.0 * kPi)) / (2.0 * std::log(base));
}

}  // namespace

double yarn_default_magnitude(double factor) {
  return factor <= 1.0 ? 1.0 : 0.1 * std::log(factor) + 1.0;
}

RopeFrequencies rope_frequencies(const config::RopeConfig& rope, int64_t rotary_dim, int64_t seq_len) {
  using config::RopeScalingKind;
  const config::RopeScalingConfig& sc = rope.scaling;
  const double s = sc.factor;
  const double original = static_cast<double>(sc.original_max_positions);
  RopeFrequencies out;
  switch (sc.kind) {
    case RopeScalingKind::none:
      out.inv_freq = plain(rope.base, rotary_dim);
      break;
    case RopeScalingKind::linear:
      out.inv_freq = plain(rope.base, rotary_dim);
      out.position_scale = 1.0 / s;
      break;
    case RopeScalingKind::ntk:
      out.inv_freq = plain(ntk_base(rope.base, s, rotary_dim), rotary_dim);
      break;
    case RopeScalingKind::dynamic_ntk: {
      // Only once the sequence outgrows the training length; the effective factor grows with it.
      double eff = 1.0;
      if (original > 0 && static_cast<double>(seq_len) > original)
        eff = s * static_cast<double>(seq_len) / original - (s - 1.0);
      out.inv_freq = plain(eff > 1.0 ? ntk_base(rope.base, eff, rotary_dim) : rope.base, rotary_dim);
      break;
    }
    case RopeScalingKind::yarn: {
      // NTK-by-parts: pairs that turn more than beta_fast times over the original length keep
      // their frequency, those turning fewer than beta_slow times are interpolated by s, and a
      // linear ramp blends in between. Plus the logit temperature (magnitude).
      const std::vector<double> extrapolated = plain(rope.base, rotary_dim);
      const int64_t half = rotary_dim / 2;
      double low = std::floor(yarn_correction_dim(sc.beta_fast, rotary_dim, rope.base, original));
      double high = std::ceil(yarn_correction_dim(sc.beta_slow, rotary_dim, rope.base, original));
      low = std::max(low, 0.0);
      high = std::min(high, static_cast<double>(rotary_dim - 1));
      if (low == high) high += 0.001;  // avoid a zero-width ramp
      out.inv_freq.resize(half);
      for (int64_t i = 0; i < half; ++i) {
        const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
        const double keep = 1.0 - ramp;  // 1: extrapolate (keep theta), 0: interpolate (theta / s)
        out.inv_freq[i] = extrapolated[i] / s * (1.0 - keep) + extrapolated[i] * keep;
      }
      out.magnitude = sc.attention_factor > 0 ? sc.attention_factor : yarn_default_magnitude(s);
      break;
    }
  }
  return out;
}

}  // namespace roformer::model
