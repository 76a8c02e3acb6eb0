// The angle of a rotated pair and its (cos, sin), shared by every kernel that rotates: the fused
// RoPE op (ops/rope, CPU and CUDA) and the short-sequence attention kernel's rotation tables
// (ops/short_attention), so a table row and an on-the-fly rotation give the same bits. The
// error budget is rope_math.h's. No LibTorch here (nvcc compiles it without ATen headers).
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define ROFORMER_HD __host__ __device__ __forceinline__
#else
#define ROFORMER_HD inline
#endif

namespace roformer::ops {

ROFORMER_HD double rope_angle(int64_t position, double position_scale, double inv_freq) {
  return static_cast<double>(position) * position_scale * inv_freq;
}

// sin and cos of r in [-pi/4, pi/4] by their Taylor series through r^9 and r^10 (truncation
// below 1.2e-10); Horner in r^2, no branches, no tables.
ROFORMER_HD void sincos_quarter(float r, float* s, float* c) {
  const float r2 = r * r;
  float ps = 1.0f / 362880.0f;  // 1/9!
  ps = ps * r2 - 1.0f / 5040.0f;
  ps = ps * r2 + 1.0f / 120.0f;
  ps = ps * r2 - 1.0f / 6.0f;
  *s = r + r * r2 * ps;
  float pc = -1.0f / 3628800.0f;  // -1/10!
  pc = pc * r2 + 1.0f / 40320.0f;
  pc = pc * r2 - 1.0f / 720.0f;
  pc = pc * r2 + 1.0f / 24.0f;
  *c = (1.0f - 0.5f * r2) + r2 * r2 * pc;
}

// (cos, sin) of the angle in the accumulation type (see the error budget above). The angle
// is split in double into a quadrant q = rint(angle / (pi/2)) and r = angle - q pi/2 in
// [-pi/4, pi/4]; r is rounded once to float, its sin and cos come from sincos_quarter and q
// picks their order and signs. Branch-free (selects), so the CPU table loop vectorises and the
// CUDA kernels carry no slow-path argument reduction.
ROFORMER_HD void rope_sincos(double angle, float* c, float* s) {
  constexpr double kHalfPi = 1.5707963267948966192313216916398;
  const double q = rint(angle * (1.0 / kHalfPi));
  const double m = q - 4.0 * floor(q * 0.25);  // q mod 4, exactly, in {0, 1, 2, 3}
  float sr, cr;
  sincos_quarter(static_cast<float>(angle - q * kHalfPi), &sr, &cr);
  const bool odd = m == 1.0 || m == 3.0;
  const float sv = odd ? cr : sr, cv = odd ? sr : cr;
  *s = m >= 2.0 ? -sv : sv;              // sin: s, c, -s, -c
  *c = m == 1.0 || m == 2.0 ? -cv : cv;  // cos: c, -s, -c, s
}
ROFORMER_HD void rope_sincos(double angle, double* c, double* s) {
  *c = cos(angle);
  *s = sin(angle);
}

// Row `pos` of a (cos, sin) table: cos of every pair, then sin (no sign, no magnitude).
template <typename acc_t>
ROFORMER_HD void rope_table_row(int64_t pos, double position_scale, const double* inv_freq, int64_t half, acc_t* row) {
  for (int64_t i = 0; i < half; ++i) rope_sincos(rope_angle(pos, position_scale, inv_freq[i]), &row[i], &row[half + i]);
}

}  // namespace roformer::ops
