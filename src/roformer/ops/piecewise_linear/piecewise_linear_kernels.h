// Kernel entry points of the piecewise-linear map (no LibTorch types): piecewise_linear.cpp
// fills a PiecewiseLinearLaunch and calls the CPU kernels.
#pragma once

#include <cstdint>

#include "roformer/ops/common/kernel_dtype.h"

namespace roformer::ops {

struct PiecewiseLinearLaunch {
  int64_t inputs = 0, heads = 0, kinks = 0;  // N, H, W
  KernelDType dtype = KernelDType::f32;      // f32 or f64, every tensor alike
  const void* x = nullptr;                   // [N]
  const void* kink = nullptr;                // [W]
  const void* slope = nullptr;               // [H, W + 1]
  const void* intercept = nullptr;           // [H, W + 1]
  const void* grad = nullptr;                // backward: [H, N]
  void* out = nullptr;                       // forward: [H, N]; backward: d loss / d x [N]
  void* grad_slope = nullptr;                // backward: [chunks, H, W + 1] partial sums
  void* grad_intercept = nullptr;            // backward: [chunks, H, W + 1] partial sums
};

// Inputs per chunk of the backward's partial sums (fixed, so the sums do not depend on threads).
constexpr int64_t kPiecewiseChunk = 4096;

// CPU kernels (piecewise_linear_cpu.cpp), parallel over chunks of inputs.
void piecewise_linear_forward_cpu(const PiecewiseLinearLaunch& launch);
void piecewise_linear_backward_cpu(const PiecewiseLinearLaunch& launch);

}  // namespace roformer::ops
