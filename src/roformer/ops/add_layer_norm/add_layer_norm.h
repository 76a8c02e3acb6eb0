// Public API of the fused residual add + LayerNorm op: LayerNorm(x + residual) over the last
// dimension in one pass, CPU or CUDA, differentiable (one backward pass gives the gradient of
// x and residual, which are equal, and per-block partial sums of the weight and bias gradients).
// Knows nothing of configs; model code picks it (model.norm_kernel).
#pragma once

#include <torch/types.h>

namespace roformer::ops {

// x, residual: the same shape [..., N] and floating dtype (float32/64, float16, bfloat16; the
// output has it); weight, bias: [N], any floating dtype, used in float (double for float64).
// The sum x + residual is never stored: the backward recomputes it from the saved inputs.
torch::Tensor add_layer_norm(const torch::Tensor& x, const torch::Tensor& residual, const torch::Tensor& weight,
                             const torch::Tensor& bias, double eps);

}  // namespace roformer::ops
