// The short causal convolution, SiLU and per-group L2 normalisation that PaTH's authors put on
// its w (and the DeltaNet family on keys): per channel c, u_t = w_c0 x_{t-2} + w_c1 x_{t-1} +
// w_c2 x_t (zeros before the first token), y = u sigmoid(u), and each group of D channels of a
// token scaled to y / sqrt(|y|^2 + eps). One pass forward and one backward, where LibTorch's form
// is a depthwise conv1d over a transposed copy and five elementwise passes each way.
#pragma once

#include <torch/types.h>

namespace roformer::ops {

// Whether the op takes x: on the CPU, float or double.
bool conv_silu_norm_takes(const torch::Tensor& x);

// x [B, S, G, D], weight [G * D, 1, 3] (conv1d's depthwise weight) -> [B, S, G, D];
// differentiable in x and weight.
torch::Tensor conv_silu_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

}  // namespace roformer::ops
