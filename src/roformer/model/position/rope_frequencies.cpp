// Inverse frequencies for every RoPE scaling kind. Formulas follow the papers (RoFormer eq. 15;
// Chen et al. 2023 PI; bloc97's NTK-aware base change; Peng et al. 2023 YaRN; Meta's Llama 3.1
// wavelength rule; Ding et al. 2024 LongRoPE's searched factors; Barbero et al. 2025 p-RoPE) and
// match the conventions of Hugging Face's rope utilities (ROPE_INIT_FUNCTIONS: yarn, llama3,
// longrope, proportional) so checkpoints and numbers are comparable.
#include "roformer/model/position/rope_frequencies.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "roformer/common/errors.h"

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

// YaRN's m(s, mscale) = 0.1 mscale ln(s) + 1 (1 for s <= 1).
double yarn_mscale(double s, double mscale) {
  return s <= 1.0 ? 1.0 : 0.1 * mscale * std::log(s) + 1.0;
}

// NTK-by-parts: pairs that turn more than beta_fast times over the original length keep their
// frequency, those turning fewer than beta_slow times are interpolated by s, and a linear ramp
// blends in between; plus the logit temperature (magnitude).
RopeFrequencies yarn(const config::RopeConfig& rope, int64_t rotary_dim) {
  const config::RopeScalingConfig& sc = rope.scaling;
  const double s = sc.factor, original = static_cast<double>(sc.original_max_positions);
  const std::vector<double> extrapolated = plain(rope.base, rotary_dim);
  double low = yarn_correction_dim(sc.beta_fast, rotary_dim, rope.base, original);
  double high = yarn_correction_dim(sc.beta_slow, rotary_dim, rope.base, original);
  if (sc.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(rotary_dim - 1));
  if (low == high) high += 0.001;  // avoid a zero-width ramp
  RopeFrequencies out;
  out.inv_freq.resize(rotary_dim / 2);
  for (size_t i = 0; i < out.inv_freq.size(); ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double keep = 1.0 - ramp;  // 1: extrapolate (keep theta), 0: interpolate (theta / s)
    out.inv_freq[i] = extrapolated[i] / s * (1.0 - keep) + extrapolated[i] * keep;
  }
  if (sc.attention_factor > 0)
    out.magnitude = sc.attention_factor;
  else if (sc.mscale > 0 && sc.mscale_all_dim > 0)
    out.magnitude = yarn_mscale(s, sc.mscale) / yarn_mscale(s, sc.mscale_all_dim);
  else
    out.magnitude = yarn_default_magnitude(s);
  return out;
}

// Llama 3.1: with wavelength lambda = 2 pi / theta, keep theta when lambda < L / high, divide it
// by s when lambda > L / low, and blend smoothly in between. No temperature.
std::vector<double> llama3(const config::RopeConfig& rope, int64_t rotary_dim) {
  const config::RopeScalingConfig& sc = rope.scaling;
  const double L = static_cast<double>(sc.original_max_positions), s = sc.factor;
  const double low_wavelen = L / sc.low_freq_factor, high_wavelen = L / sc.high_freq_factor;
  std::vector<double> f = plain(rope.base, rotary_dim);
  for (double& theta : f) {
    const double wavelen = 2.0 * kPi / theta;
    if (wavelen < high_wavelen) continue;
    if (wavelen > low_wavelen) {
      theta /= s;
      continue;
    }
    const double smooth = (L / wavelen - sc.low_freq_factor) / (sc.high_freq_factor - sc.low_freq_factor);
    theta = (1.0 - smooth) * theta / s + smooth * theta;
  }
  return f;
}

// LongRoPE (Hugging Face's static form): theta_i / factor_i with the short list up to the
// original length and the long list past it; attention factor sqrt(1 + ln s / ln L).
RopeFrequencies longrope(const config::RopeConfig& rope, int64_t rotary_dim, int64_t seq_len) {
  const config::RopeScalingConfig& sc = rope.scaling;
  const double L = static_cast<double>(sc.original_max_positions), s = sc.factor;
  const std::vector<double>& factors = static_cast<double>(seq_len) > L ? sc.long_factor : sc.short_factor;
  RopeFrequencies out;
  out.inv_freq = plain(rope.base, rotary_dim);
  for (size_t i = 0; i < out.inv_freq.size(); ++i) out.inv_freq[i] /= factors.at(i);
  if (sc.attention_factor > 0)
    out.magnitude = sc.attention_factor;
  else
    out.magnitude = s <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(s) / std::log(L));
  return out;
}

// p-RoPE: the frequencies past the highest floor(p d / 2) become 0, so those pairs never turn.
void keep_highest_frequencies(std::vector<double>& inv_freq, double fraction, int64_t rotary_dim) {
  const auto kept = static_cast<size_t>(std::floor(fraction * static_cast<double>(rotary_dim) / 2.0));
  for (size_t i = kept; i < inv_freq.size(); ++i) inv_freq[i] = 0.0;
}

}  // namespace

double yarn_default_magnitude(double factor) {
  return factor <= 1.0 ? 1.0 : 0.1 * std::log(factor) + 1.0;
}

// Settings the config accepts one by one can still meet in a non-finite frequency or magnitude
// (YaRN's mscale at an extreme factor, say): refused here, where training, evaluation and
// `roformer config rope` all compute them, instead of rotating by NaN.
static void check_finite(const RopeFrequencies& f, const config::RopeConfig& rope, int64_t seq_len) {
  bool finite = std::isfinite(f.position_scale) && std::isfinite(f.magnitude) && f.magnitude > 0;
  for (const double v : f.inv_freq) finite = finite && std::isfinite(v);
  if (finite) return;
  char what[160];
  std::snprintf(what, sizeof what, "(scaling factor %g, at length %lld: magnitude %g, position scale %g)",
                rope.scaling.factor, static_cast<long long>(seq_len), f.magnitude, f.position_scale);
  throw UserError(std::string("model.position.rope: these settings give non-finite RoPE frequencies ") + what +
                  "; check model.position.rope.scaling (its factor, original_max_positions and the YaRN mscale "
                  "settings)");
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
    case RopeScalingKind::yarn:
      out = yarn(rope, rotary_dim);
      break;
    case RopeScalingKind::llama3:
      out.inv_freq = llama3(rope, rotary_dim);
      break;
    case RopeScalingKind::longrope:
      out = longrope(rope, rotary_dim, seq_len);
      break;
  }
  if (rope.frequency_fraction < 1.0) keep_highest_frequencies(out.inv_freq, rope.frequency_fraction, rotary_dim);
  check_finite(out, rope, seq_len);
  return out;
}

const RopeFrequencies& RopeFrequencyCache::at(int64_t length) {
  if (length_ != length) {
    freqs_ = rope_frequencies(rope_, rotary_dim_, length);
    length_ = length;
  }
  return freqs_;
}

}  // namespace roformer::model
