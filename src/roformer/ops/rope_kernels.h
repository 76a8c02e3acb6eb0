// Kernel entry points of the fused RoPE op (no LibTorch types): rope.cpp fills a RopeLaunch
// and calls the kernel for the tensors' device.
#pragma once

#include "roformer/ops/rope_math.h"

namespace roformer::ops {

// CPU kernel (rope_cpu.cpp): parallel over tokens with at::parallel_for.
void rope_cpu(const RopeLaunch& launch);

#ifdef ROFORMER_WITH_CUDA
// CUDA kernel (rope_cuda.cu): one launch for every tensor in `launch`, on `stream`
// (a cudaStream_t passed as void* to keep CUDA headers out of C++ translation units).
void rope_cuda(const RopeLaunch& launch, void* stream);
#endif

}  // namespace roformer::ops
