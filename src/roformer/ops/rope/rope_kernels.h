// Kernel entry points of the fused RoPE op (no LibTorch types): rope.cpp fills a RopeLaunch
// and calls the kernel for the tensors' device.
#pragma once

#include "roformer/ops/rope/rope_math.h"

namespace roformer::ops {

// CPU kernel (rope_cpu.cpp): parallel over tokens with at::parallel_for.
void rope_cpu(const RopeLaunch& launch);

// Rows 0..rows-1 of a (cos, sin) table (rope_table_row) into out [rows, 2 * half], with the
// code the CPU kernel computes them with, so a table and the kernel give the same bits.
void rope_cpu_table(const double* inv_freq, int64_t half, double position_scale, int64_t rows, float* out);

#ifdef ROFORMER_WITH_CUDA
// CUDA kernel (rope_cuda.cu): one launch for every tensor in `launch`, on `stream`
// (a cudaStream_t passed as void* to keep CUDA headers out of C++ translation units).
void rope_cuda(const RopeLaunch& launch, void* stream);
#endif

}  // namespace roformer::ops
