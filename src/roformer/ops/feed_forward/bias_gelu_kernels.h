// Kernel entry points of the fused bias + GELU op (no LibTorch types): bias_gelu.cpp fills a
// BiasGeluLaunch and calls the kernel for the tensors' device.
#pragma once

#include "roformer/ops/feed_forward/bias_gelu_math.h"

namespace roformer::ops {

// CPU kernels (bias_gelu_cpu.cpp), parallel over rows with at::parallel_for.
void bias_gelu_forward_cpu(const BiasGeluLaunch& launch);
void bias_gelu_backward_cpu(const BiasGeluLaunch& launch);

#ifdef ROFORMER_WITH_CUDA
// CUDA kernels (bias_gelu_cuda.cu) on `stream` (a cudaStream_t passed as void*). The backward
// writes d loss / d x only; bias_gelu.cpp sums its columns for the bias gradient.
void bias_gelu_forward_cuda(const BiasGeluLaunch& launch, void* stream);
void bias_gelu_backward_cuda(const BiasGeluLaunch& launch, void* stream);
#endif

}  // namespace roformer::ops
