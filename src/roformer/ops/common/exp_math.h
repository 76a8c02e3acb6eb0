// e^a for a <= 0 in float, branch-free, on the CPU: the exponential the GELU kernel, the
// attention kernels' softmaxes and the sigmoid below share (ops/feed_forward, ops/short_attention,
// ops/tile_attention; the sigmoid: CoPE's gates, stick-breaking's sticks). Cody-Waite reduction a = n ln2 + r with ln2
// split in two, |r| <= ln2/2, Taylor polynomial of degree 7 (truncation below r^8/8! < 5e-9 relative), times 2^n built
// in the exponent bits.
#pragma once

#include <cmath>
#include <cstdint>

#if !defined(__CUDACC__)
namespace roformer::ops {

// The steps of e^a before the power of two, for a float or a GCC vector of floats (the attention
// kernel's softmax uses them on 8 lanes): n = round(a / ln2) and e^(a - n ln2) by the degree-7
// Taylor polynomial. `safe` is a, clamped at -87 by the caller.
template <typename F>
inline void exp_reduced(F safe, F* n, F* p) {
  *n = (safe * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round(a / ln2)
  const F r = (safe - *n * 0.693359375f) - *n * -2.12194440e-4f;   // a - n ln2 (hi + lo)
  F q = F{} + 1.0f / 5040.0f;                                      // a float, or the constant in every lane
  q = q * r + 1.0f / 720.0f;
  q = q * r + 1.0f / 120.0f;
  q = q * r + 1.0f / 24.0f;
  q = q * r + 1.0f / 6.0f;
  q = q * r + 0.5f;
  q = q * r + 1.0f;
  *p = q * r + 1.0f;
}

// e^a for a <= 0 (and NaN), branch-free: see the header comment. a < -87 gives ~e^-87.
inline float exp_nonpositive(float a) {
  const float safe = a >= -87.0f ? a : -87.0f;  // NaN and -inf become -87 here
  float n, p;
  exp_reduced(safe, &n, &p);
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;  // 2^n, n in [-126, 0]
  const float e = p * __builtin_bit_cast(float, bits);
  return a == a ? e : a;  // NaN stays NaN
}

// sigmoid(x) from e^-|x|: exp_nonpositive in float, so the loop vectorises; exactly 0 below -87
// (hidden keys count nothing) and NaN for NaN. The C library's in double.
inline __attribute__((always_inline)) float sigmoid(float x) {
  const float e = exp_nonpositive(x >= 0.0f ? -x : x);
  const float g = x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
  return x < -87.0f ? 0.0f : g;
}
inline __attribute__((always_inline)) double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

}  // namespace roformer::ops
#endif
