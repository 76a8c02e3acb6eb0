// LibTorch dtype -> KernelDType for the ops' argument checks (rope.cpp, bias_gelu.cpp,
// add_layer_norm.cpp), and the dtype those ops accumulate in.
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include "roformer/ops/common/kernel_dtype.h"

namespace roformer::ops {

// `op` names the caller in the error for an unsupported dtype.
inline KernelDType to_kernel_dtype(c10::ScalarType t, const char* op) {
  switch (t) {
    case c10::kFloat:
      return KernelDType::f32;
    case c10::kDouble:
      return KernelDType::f64;
    case c10::kHalf:
      return KernelDType::f16;
    case c10::kBFloat16:
      return KernelDType::bf16;
    default:
      TORCH_CHECK(false, op, ": unsupported dtype ", t, "; use float32, float64, float16 or bfloat16");
  }
}

// The dtype a kernel accumulates `t` in: double for double, float for every other dtype.
inline c10::ScalarType accumulate_dtype(c10::ScalarType t) {
  return t == c10::kDouble ? c10::kDouble : c10::kFloat;
}

}  // namespace roformer::ops
