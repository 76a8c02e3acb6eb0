// The fused residual add + LayerNorm op's math, shared by the CPU kernel (add_layer_norm_cpu.cpp)
// and the CUDA kernel (add_layer_norm_cuda.cu): the launch description and every formula but the
// row sums, which each device forms its own way (fixed lanes on the CPU, warp shuffles on the
// GPU). No LibTorch here (nvcc compiles it without ATen headers).
//
// Per row of v = x + residual, n = cols (Ba, Kiros & Hinton 2016, eq. 4, biased variance):
//   mean = sum(v) / n,  rstd = 1 / sqrt(sum((v - mean)^2) / n + eps)   (two passes, no E[v^2])
//   xhat = (v - mean) rstd,  y = xhat w + b
// Backward, with g = dL/dy and gw = g w:
//   dL/dv = rstd (gw - mean(gw) - xhat mean(gw xhat)) = dL/dx = dL/dresidual
//   dL/dw = sum over rows of g xhat,  dL/db = sum over rows of g
// Half types accumulate in float, float64 in double.
#pragma once

#include <cmath>
#include <cstdint>

#include "roformer/ops/common/kernel_dtype.h"

#if defined(__CUDACC__)
#define ROFORMER_LN_HD __host__ __device__ __forceinline__
#else
#define ROFORMER_LN_HD inline
#endif

namespace roformer::ops {

// One call. Row-major [rows, cols] tensors in `dtype`; weight, bias, mean, rstd and the partial
// sums in the accumulation type (double for f64, else float).
struct AddLayerNormLaunch {
  int64_t rows = 0, cols = 0;
  KernelDType dtype = KernelDType::f32;
  double eps = 1e-12;
  const void* x = nullptr;
  const void* residual = nullptr;
  const void* weight = nullptr;  // [cols]
  const void* bias = nullptr;    // [cols]
  void* mean = nullptr;          // [rows]: the forward writes them, the backward reads them
  void* rstd = nullptr;          // [rows]
  void* out = nullptr;           // forward: y
  const void* grad = nullptr;    // backward: dL/dy
  void* grad_in = nullptr;       // backward: dL/dv, the gradient of both x and residual
  // Backward gradients of weight and bias. The CPU kernel writes them ([cols]); the CUDA kernel
  // writes partial rows ([blocks, cols]: block k sums rows [k, k + 1) * rows_per_block), which
  // add_layer_norm.cpp adds up. Both sum their blocks in a fixed order: no thread-count effect.
  void* weight_grad = nullptr;
  void* bias_grad = nullptr;
  int64_t rows_per_block = 1;
  void* weight_grad_partial = nullptr;
  void* bias_grad_partial = nullptr;
};

ROFORMER_LN_HD int64_t add_layer_norm_blocks(const AddLayerNormLaunch& p) {
  return (p.rows + p.rows_per_block - 1) / p.rows_per_block;
}

ROFORMER_LN_HD float ln_sqrt(float v) {
  return sqrtf(v);
}
ROFORMER_LN_HD double ln_sqrt(double v) {
  return sqrt(v);
}

// 1 / sqrt(variance + eps) from the sum of squared deviations of n values (correctly rounded
// square root and division, not an approximate rsqrt).
template <typename acc_t>
ROFORMER_LN_HD acc_t ln_rstd(acc_t sum_sq_dev, int64_t n, double eps) {
  return acc_t(1) / ln_sqrt(sum_sq_dev / static_cast<acc_t>(n) + static_cast<acc_t>(eps));
}

template <typename acc_t>
ROFORMER_LN_HD acc_t ln_xhat(acc_t v, acc_t mean, acc_t rstd) {
  return (v - mean) * rstd;
}

template <typename acc_t>
ROFORMER_LN_HD acc_t ln_affine(acc_t xhat, acc_t w, acc_t b) {
  return xhat * w + b;
}

// dL/dv of one element; mean_gw = mean(gw) and mean_gw_xhat = mean(gw xhat) over the row.
template <typename acc_t>
ROFORMER_LN_HD acc_t ln_grad_in(acc_t gw, acc_t xhat, acc_t rstd, acc_t mean_gw, acc_t mean_gw_xhat) {
  return rstd * (gw - mean_gw - xhat * mean_gw_xhat);
}

}  // namespace roformer::ops
