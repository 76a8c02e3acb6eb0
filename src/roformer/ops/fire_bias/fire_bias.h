// Public API of the fused FIRE bias (Li et al. 2024) for evaluation: the bias of a block of query
// rows over keys [0, K) from 1-D integer positions and FIRE's MLP written as a piecewise-linear
// function (its kinks, and per head a slope and an intercept per segment), in one pass per row
// without autograd: the distances' logarithms come from a table over the block's distances, and
// the segment of each key is walked from its neighbour's. CPU. Knows nothing of configs; the FIRE
// family calls it when nothing needs gradients.
#pragma once

#include <torch/types.h>

namespace roformer::ops {

// Inputs of the bias for rows [begin, end) of `positions` ([S], int64) and keys [0, keys).
struct FireBiasArgs {
  torch::Tensor positions;
  int64_t begin = 0, end = 0, keys = 0;
  double c = 0, threshold = 0, eps = 0;  // psi(x) = log(|c x| + 1); L; the denominator's epsilon
  torch::Tensor kinks;                   // [W], ascending (+inf for a unit that never switches)
  torch::Tensor slope, intercept;        // [H, W + 1], float32 or float64: the output's dtype
};

// out[h, r, j] = slope[h, s] x + intercept[h, s], with x = psi(p_i - p_j) / (psi(max(p_i, L)) + eps)
// for query i = begin + r, s the number of kinks below x (torch.searchsorted's left side), in the
// slopes' dtype: [H, end - begin, keys].
torch::Tensor fire_bias(const FireBiasArgs& args);

}  // namespace roformer::ops
