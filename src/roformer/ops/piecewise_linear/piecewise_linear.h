// Public API of the fused piecewise-linear map by head: a one-input function given by its kinks
// and, per head, a slope and an intercept per segment (FIRE's MLP, FireMlpImpl::piecewise),
// evaluated at every input for every head in one pass, differentiable in the inputs, slopes and
// intercepts (the backward sums the segment gradients per fixed chunk of inputs, so the result
// does not depend on the thread count). CPU. Knows nothing of configs.
#pragma once

#include <torch/types.h>

namespace roformer::ops {

// x [...] (float32/64), kinks [W] ascending (no gradient), slope and intercept [H, W + 1] in x's
// dtype -> [H, ...]: out[h, n] = slope[h, s] x_n + intercept[h, s], s = the number of kinks
// below x_n (torch.searchsorted's left side). CPU tensors only.
torch::Tensor piecewise_linear(const torch::Tensor& x, const torch::Tensor& kinks, const torch::Tensor& slope,
                               const torch::Tensor& intercept);

}  // namespace roformer::ops
