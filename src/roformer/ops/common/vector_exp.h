// e^a on a whole vector of float a <= 0 (small_gemm.h's 32- or 64-byte vectors): exp_nonpositive's
// steps (common/exp_math.h) on 8 or 16 lanes at once, for the row softmaxes of the CPU attention kernels
// (short_attention_cpu.cpp, tile_attention_cpu.cpp). Header-only and always inlined, so each
// ROFORMER_CLONES caller gets it compiled for its instruction set.
#pragma once

#include <cstdint>
#include <cstring>

#include "roformer/ops/common/exp_math.h"  // exp_reduced, the float exp shared with GELU
#include "roformer/ops/common/small_gemm.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace roformer::ops::small_gemm {

template <int kBytes = 32>
ROFORMER_ALWAYS_INLINE typename Vec<float, kBytes>::type exp_nonpositive(typename Vec<float, kBytes>::type a) {
  using vf = typename Vec<float, kBytes>::type;
  typedef int32_t vi __attribute__((vector_size(kBytes)));
  const vf lo = vf{} - 87.0f;
  vf n, q;
  exp_reduced(a < lo ? lo : a, &n, &q);  // NaN passes and makes the result NaN
  const vi bits = (__builtin_convertvector(n, vi) + 127) << 23;
  vf scale;  // 2^n, n in [-126, 0]
  std::memcpy(&scale, &bits, sizeof(scale));
  return q * scale;
}

}  // namespace roformer::ops::small_gemm

#pragma GCC diagnostic pop
