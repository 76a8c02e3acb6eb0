// Public API of the fused bias + GELU op: GELU(x + bias) over the last dimension in one pass,
// CPU or CUDA, differentiable (the backward is one pass too, with the bias gradient summed in
// it on the CPU). Knows nothing of configs; model code picks it (model.activation_kernel).
#pragma once

#include <torch/types.h>

namespace roformer::ops {

// x: [..., N] (float32/64, float16 or bfloat16; the output has its dtype); bias: [N], any
// floating dtype, added in float (double for float64 x). tanh selects GELU's tanh approximation.
torch::Tensor bias_gelu(const torch::Tensor& x, const torch::Tensor& bias, bool tanh);

}  // namespace roformer::ops
