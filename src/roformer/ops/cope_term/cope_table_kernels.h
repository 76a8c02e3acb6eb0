// Kernel entry points of CoPE's causal table products (no LibTorch types): cope_table.cpp fills a
// CopeTableLaunch, cope_table_cpu.cpp runs it on small_gemm's register tiles, which write each
// block's window of the table straight (the BLAS call zeroed it first, a pass over the table).
#pragma once

#include <cstdint>

#include "roformer/ops/common/kernel_dtype.h"

namespace roformer::ops {

// Rows in blocks of kCausalTableBlockRows; block b forms (forward) or reads (backward) the first
// reach[b] entries of its rows. Every tensor in the launch's dtype (f32 or f64).
struct CopeTableLaunch {
  KernelDType dtype = KernelDType::f32;
  int64_t pairs = 0, seq = 0, dim = 0, positions = 0;
  const int64_t* reach = nullptr;
  const void* q = nullptr;      // [pairs, S, D] contiguous
  const void* table = nullptr;  // e, [D, P] contiguous
  void* out = nullptr;          // forward: [pairs, S, P], zero past each block's reach
  // Backward: the incoming gradient's rows (grad_ld apart, pairs grad_pair_stride apart, in
  // elements), e transposed [P, D], d q [pairs, S, D] out, and each pair's share of d e out
  // ([pairs, D, P], summed by the caller in a fixed order).
  const void* grad = nullptr;
  int64_t grad_pair_stride = 0, grad_ld = 0;
  const void* table_t = nullptr;
  void* grad_q = nullptr;
  void* grad_table_parts = nullptr;
};

// Whether the kernels take rows of `dim` values of `dtype` (f32 or f64, a multiple of 32 bytes).
bool cope_table_kernels_take(KernelDType dtype, int64_t dim);

void cope_table_forward_cpu(const CopeTableLaunch& launch);
void cope_table_backward_cpu(const CopeTableLaunch& launch);

}  // namespace roformer::ops
