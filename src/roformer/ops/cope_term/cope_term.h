// Public API of the fused CoPE term (Golovneva et al. 2024): from a block's attention scores and
// the queries' products with the position table, the interpolated position term in one pass per
// row, CPU, differentiable (the backward is two passes per row and keeps no [.., S] temporaries
// but the gradients). Knows nothing of configs; the CoPE family calls it for CPU tensors.
#pragma once

#include <torch/types.h>

namespace roformer::ops {

// scores [.., S] (hidden keys -inf or very negative), at_integers [.., P] = q . e[p] for
// p = 0..P-1, the same leading dimensions. Per row, with g_t = sigmoid(scores_t),
//   p_j = clamp(sum_{t >= j} g_t, 0, P - 1),
//   out_j = at_integers[ceil p_j] w_j + at_integers[floor p_j] (1 - w_j),   w_j = p_j - floor p_j,
// in float (double for float64 inputs), differentiable in both inputs as autograd differentiates
// that formula (the clamp passes the gradient on its bounds). CPU tensors only.
torch::Tensor cope_term(const torch::Tensor& scores, const torch::Tensor& at_integers);

}  // namespace roformer::ops
