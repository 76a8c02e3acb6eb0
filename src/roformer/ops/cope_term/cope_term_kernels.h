// Kernel entry points of the fused CoPE term (no LibTorch types): cope_term.cpp fills a
// CopeTermLaunch and calls the CPU kernel.
#pragma once

#include <cstdint>

#include "roformer/ops/common/kernel_dtype.h"

namespace roformer::ops {

struct CopeTermLaunch {
  int64_t rows = 0;                      // product of the leading dimensions
  int64_t keys = 0;                      // S
  int64_t positions = 0;                 // P
  KernelDType dtype = KernelDType::f32;  // f32 or f64, every tensor alike
  const void* scores = nullptr;          // [rows, S]
  const void* at_integers = nullptr;     // [rows, P]
  const void* grad = nullptr;            // backward: d loss / d out, [rows, S]
  void* out = nullptr;                   // forward: the term [rows, S]; backward: d loss / d scores
  void* grad_at_integers = nullptr;      // backward: [rows, P]
};

// CPU kernels (cope_term_cpu.cpp), parallel over rows.
void cope_term_forward_cpu(const CopeTermLaunch& launch);
void cope_term_backward_cpu(const CopeTermLaunch& launch);

}  // namespace roformer::ops
