// The storage types the custom ops' kernels take (RoPE, bias + GELU): a plain enum the kernel
// headers carry into nvcc-compiled code (kernel_dtype_torch.h maps LibTorch's dtypes onto it).
// Half types accumulate in float, float64 in double.
#pragma once

namespace roformer::ops {

enum class KernelDType { f32, f64, f16, bf16 };

}  // namespace roformer::ops
