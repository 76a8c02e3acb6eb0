// RoPE frequencies with context-extension scaling, in double precision: the single place where
// base, rotary_dim and the scaling kinds (linear/PI, NTK-aware, dynamic NTK, YaRN) turn into
// per-pair inverse frequencies, a position scale and a magnitude (YaRN's attention factor).
// Used by the reference rotation, the fused op's parameters and the tests.
#pragma once

#include <cstdint>
#include <vector>

#include "roformer/config/config.h"

namespace roformer::model {

struct RopeFrequencies {
  std::vector<double> inv_freq;  // [rotary_dim / 2]: angle of pair i = position * position_scale * inv_freq[i]
  double position_scale = 1.0;   // linear (PI) divides positions by the factor
  double magnitude = 1.0;        // YaRN multiplies cos and sin by this (scales logits by its square)
};

// `seq_len` is the length of the current forward pass (dynamic NTK depends on it).
RopeFrequencies rope_frequencies(const config::RopeConfig& rope, int64_t rotary_dim, int64_t seq_len);

// The frequencies of a pass of `length` tokens, recomputed only when the length changes (dynamic
// NTK and LongRoPE depend on it): what RoPE and ReRoPE keep between forward passes.
class RopeFrequencyCache {
 public:
  RopeFrequencyCache(const config::RopeConfig& rope, int64_t rotary_dim) : rope_(rope), rotary_dim_(rotary_dim) {}
  const RopeFrequencies& at(int64_t length);

 private:
  config::RopeConfig rope_;
  int64_t rotary_dim_;
  RopeFrequencies freqs_;
  int64_t length_ = -1;
};

// YaRN's default attention factor 0.1 ln(s) + 1 (1 for s <= 1).
double yarn_default_magnitude(double factor);

}  // namespace roformer::model
