// The scalar steps of CoPE's term that the fused term (cope_term_cpu.cpp) and the tile attention
// kernel (ops/tile_attention) share, so both count positions and interpolate alike: the gate
// sigmoid and a position's two table indices with the weight of the upper one.
#pragma once

#include <cmath>
#include <cstdint>

#include "roformer/ops/common/cpu_kernel_support.h"
#include "roformer/ops/common/exp_math.h"  // exp_nonpositive

namespace roformer::ops::cope_math {

// sigmoid(x) from e^-|x|: exp_nonpositive (common/exp_math.h) in float, so the loop vectorises;
// exactly 0 below -87 (hidden keys count nothing) and NaN for NaN. The C library's in double.
ROFORMER_ALWAYS_INLINE float sigmoid(float x) {
  const float e = exp_nonpositive(x >= 0.0f ? -x : x);
  const float g = x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
  return x < -87.0f ? 0.0f : g;
}
ROFORMER_ALWAYS_INLINE double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// A position's two table indices and the weight of the upper one, clamped to [0, top]; a NaN
// position reads index 0 with weight NaN, so the term is NaN as the formula's would be.
template <typename acc_t>
struct Interpolation {
  int64_t low, high;
  acc_t w;
};

template <typename acc_t>
ROFORMER_ALWAYS_INLINE Interpolation<acc_t> interpolation(acc_t raw, acc_t top) {
  const acc_t clamped = raw > acc_t(0) ? (raw < top ? raw : top) : acc_t(0);
  const acc_t low = std::floor(clamped);
  return {static_cast<int64_t>(low), static_cast<int64_t>(std::ceil(clamped)), raw == raw ? clamped - low : raw};
}

}  // namespace roformer::ops::cope_math
