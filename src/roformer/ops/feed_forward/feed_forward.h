// Public API of the blocked feed-forward op (CPU): a transformer's position-wise feed-forward layer,
// GELU(x W1^T + b1) W2^T + b2, computed in blocks of rows. ATen runs it as four whole-tensor passes
// whose [rows, F] intermediate (4 MiB at the quickstart shape) goes out of cache between them; here
// each thread takes a block of rows at a time and runs the up product, bias + GELU and the down
// product on it while the block's intermediate is still in its cache (the backward likewise: the
// gradient of the activation, GELU's derivative and the input's gradient per block, then the two
// weight gradients as whole products). Each block is one single-threaded BLAS call per product and
// its rows are fixed, so the result does not depend on the thread count or on which thread took a
// block. Knows nothing of configs; model code picks it (model.activation_kernel).
#pragma once

#include <torch/types.h>

namespace roformer::ops {

// Whether feed_forward takes these tensors: CPU, one dtype (float32 or float64), x [..., H],
// w1 [F, H], b1 [F], w2 [H', F], b2 [H'].
bool feed_forward_supports(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& b1,
                           const torch::Tensor& w2, const torch::Tensor& b2);

// Whether the op is expected to beat the unfused layers for a weight w1 [F, H] of this element
// size: where one block's intermediate and one weight fit in a core's L2 cache together (sysconf's
// size, 512 KiB where it has none). Measured on a 2-core AMD EPYC with 512 KiB of L2: 1.04x
// alone at F x H = 512 x 128 (256 + 256 KiB), 0.97x at 2048 x 512 (1 + 4 MiB).
bool feed_forward_fits_cache(int64_t F, int64_t H, int64_t element_size);

// GELU(x w1^T + b1) w2^T + b2 over x's last dimension ([..., H] -> [..., H']), differentiable in
// all five arguments; tanh selects GELU's tanh approximation. Throws where feed_forward_supports
// says no.
torch::Tensor feed_forward(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& b1,
                           const torch::Tensor& w2, const torch::Tensor& b2, bool tanh);

}  // namespace roformer::ops
