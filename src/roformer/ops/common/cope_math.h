// The scalar step of CoPE's term that the fused term (cope_term_cpu.cpp), the short kernel and the
// tile term (ops/tile_attention/terms/cope_cpu.cpp) share, so all interpolate alike: a position's
// two table indices with the weight of the upper one (the gates' sigmoid is exp_math.h's).
#pragma once

#include <cmath>
#include <cstdint>

#include "roformer/ops/common/cpu_kernel_support.h"

namespace roformer::ops::cope_math {

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
