// The fused bias + GELU op's math, shared by the CPU kernel (bias_gelu_cpu.cpp) and the CUDA
// kernel (bias_gelu_cuda.cu): the launch description, GELU and its derivative from their
// primitives (erf or tanh, and the Gaussian e^{-x^2/2}), the accurate primitives (double on the
// CPU; float and double on the GPU) and, for float on the CPU, branch-free approximations that
// GCC vectorises. No LibTorch here (nvcc compiles it without ATen headers).
//
// Numerics of the CPU float path. e^a (a <= 0): Cody-Waite reduction a = n ln2 + r with ln2 split
// in two, |r| <= ln2/2, Taylor polynomial of degree 7 (truncation below r^8/8! < 5e-9
// relative), times 2^n built in the exponent bits. erf: Abramowitz & Stegun 7.1.26,
// erfc(z) = t (a1 + a2 t + ... + a5 t^4) e^{-z^2}, t = 1 / (1 + p z), |error| <= 1.5e-7 (the
// formula ATen's own vectorised erf uses); Phi(x) = erfc(-x / sqrt 2) / 2 for x < 0, with no
// rounding in 1 + erf. Against the double formula, GELU and its derivative stay within
// 3e-7 * max(1, |x|); the test pins that.
#pragma once

#include <cmath>
#include <cstdint>

#include "roformer/ops/common/exp_math.h"  // exp_nonpositive (CPU)
#include "roformer/ops/common/kernel_dtype.h"

#if defined(__CUDACC__)
#define ROFORMER_GELU_HD __host__ __device__ __forceinline__
#else
#define ROFORMER_GELU_HD inline
#endif

namespace roformer::ops {

enum class GeluKind { exact, tanh };  // x Phi(x) with erf, or the tanh approximation

// One call: x and out are [rows, cols], rows contiguous; bias and bias_grad are [cols] in the
// accumulation type (double for f64, else float).
struct BiasGeluLaunch {
  int64_t rows = 0, cols = 0;
  KernelDType dtype = KernelDType::f32;
  GeluKind kind = GeluKind::exact;
  const void* x = nullptr;     // the matmul output, before the bias
  const void* bias = nullptr;  // accumulation type
  const void* grad = nullptr;  // backward: d loss / d out, [rows, cols] in dtype
  void* out = nullptr;         // forward: GELU(x + bias); backward: d loss / d x
  void* bias_grad = nullptr;   // backward: column sums of d loss / d x (accumulation type); may be null
};

constexpr double kGeluSqrtHalf = 0.70710678118654752440;     // 1 / sqrt(2)
constexpr double kGeluInvSqrt2Pi = 0.39894228040143267794;   // 1 / sqrt(2 pi)
constexpr double kGeluSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kGeluTanhCubic = 0.044715;                  // Hendrycks & Gimpel's tanh fit

// GELU and d GELU / dx from Phi(x) and the Gaussian e^{-x^2/2}.
template <typename T>
ROFORMER_GELU_HD void gelu_from_phi(T x, T phi, T gauss, T* y, T* dy) {
  *y = x * phi;
  *dy = phi + x * gauss * static_cast<T>(kGeluInvSqrt2Pi);
}

// The tanh form: y = x (1 + th) / 2 with th = tanh(sqrt(2/pi) (x + 0.044715 x^3)).
template <typename T>
ROFORMER_GELU_HD T gelu_tanh_inner(T x) {
  return static_cast<T>(kGeluSqrt2OverPi) * (x + static_cast<T>(kGeluTanhCubic) * x * x * x);
}
template <typename T>
ROFORMER_GELU_HD void gelu_from_tanh(T x, T th, T* y, T* dy) {
  const T half = static_cast<T>(0.5);
  *y = half * x * (static_cast<T>(1) + th);
  const T du = static_cast<T>(kGeluSqrt2OverPi) * (static_cast<T>(1) + static_cast<T>(3 * kGeluTanhCubic) * x * x);
  *dy = half * (static_cast<T>(1) + th) + half * x * (static_cast<T>(1) - th * th) * du;
}

// Accurate primitives: the C library's erf / exp / tanh (CUDA's on the device).
ROFORMER_GELU_HD float gelu_erf(float v) {
  return erff(v);
}
ROFORMER_GELU_HD double gelu_erf(double v) {
  return erf(v);
}
ROFORMER_GELU_HD float gelu_exp(float v) {
  return expf(v);
}
ROFORMER_GELU_HD double gelu_exp(double v) {
  return exp(v);
}
ROFORMER_GELU_HD float gelu_tanh_fn(float v) {
  return tanhf(v);
}
ROFORMER_GELU_HD double gelu_tanh_fn(double v) {
  return tanh(v);
}

// GELU(x) and its derivative with the accurate primitives.
template <GeluKind kind, typename T>
ROFORMER_GELU_HD void gelu_accurate(T x, T* y, T* dy) {
  if (kind == GeluKind::exact) {
    const T phi = static_cast<T>(0.5) * (static_cast<T>(1) + gelu_erf(x * static_cast<T>(kGeluSqrtHalf)));
    gelu_from_phi(x, phi, gelu_exp(static_cast<T>(-0.5) * x * x), y, dy);
  } else {
    gelu_from_tanh(x, gelu_tanh_fn(gelu_tanh_inner(x)), y, dy);
  }
}

#if !defined(__CUDACC__)
// GELU(x) and its derivative in float with the approximations above (CPU kernel).
template <GeluKind kind>
inline void gelu_fast(float x, float* y, float* dy) {
  if (kind == GeluKind::exact) {
    const float gauss = exp_nonpositive(-0.5f * x * x);  // e^{-z^2}, z = x / sqrt(2)
    const float z = (x >= 0.0f ? x : -x) * static_cast<float>(kGeluSqrtHalf);
    const float t = 1.0f / (1.0f + 0.3275911f * z);
    const float poly =
        t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    const float half_erfc = 0.5f * poly * gauss;                // Phi(-|x|)
    const float phi = x < 0.0f ? half_erfc : 1.0f - half_erfc;  // NaN: 1 - NaN
    gelu_from_phi(x, phi, gauss, y, dy);
  } else {
    const float u = gelu_tanh_inner(x);
    const float e = exp_nonpositive(-2.0f * (u >= 0.0f ? u : -u));  // tanh|u| = (1 - e) / (1 + e)
    const float th_abs = (1.0f - e) / (1.0f + e);
    gelu_from_tanh(x, u < 0.0f ? -th_abs : th_abs, y, dy);
  }
}
#endif

}  // namespace roformer::ops
