// Kernel entry points of the short convolution + SiLU + group norm op (no LibTorch types):
// conv_silu_norm.cpp fills a ConvSiluNormLaunch, conv_silu_norm_cpu.cpp runs it.
#pragma once

#include <cstdint>

#include "roformer/ops/common/kernel_dtype.h"

namespace roformer::ops {

// x and out [B, S, G, D] contiguous; the weight [G * D, 3] (tap 2 weighs token t, tap 0 token
// t - 2); every tensor in the launch's dtype (f32 or f64).
struct ConvSiluNormLaunch {
  KernelDType dtype = KernelDType::f32;
  int64_t batch = 0, length = 0, groups = 0, group = 0;
  double eps = 0;
  const void* x = nullptr;
  const void* weight = nullptr;
  void* out = nullptr;
  // Backward: d out [B, S, G, D] with contiguous rows of D (strides in elements) in, d x [B, S, G, D]
  // and each chunk of tokens' share of d weight out ([chunks, 3, G * D], summed by the caller).
  const void* grad = nullptr;
  int64_t grad_batch_stride = 0, grad_token_stride = 0, grad_group_stride = 0;
  void* d_x = nullptr;
  void* d_weight_parts = nullptr;
};

// Tokens per item of the backward (each writes one share of d weight; fixed, so the sum of the
// shares does not depend on the thread count).
constexpr int64_t kConvSiluNormChunk = 32;

void conv_silu_norm_forward_cpu(const ConvSiluNormLaunch& launch);
void conv_silu_norm_backward_cpu(const ConvSiluNormLaunch& launch);

}  // namespace roformer::ops
