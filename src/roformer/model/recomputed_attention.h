// Attention trained in linear memory: the output comes from a forward that keeps no scores (tile
// attention, run without autograd), and backward recomputes the explicit scores one block of query
// rows at a time and differentiates each block alone, so no [B, H, S, S] tensor outlives a block
// (the recomputation FlashAttention's backward does, here with the family's own explicit rows):
//   forward   forward(q, k, v, state) without autograd; saved: q, k, v, state;
//   backward  per block [begin, end): rows(q, k, v, state, begin, end) with autograd on, then
//             torch::autograd::grad of it against that block of the output's gradient, with
//             respect to q, k, v, state and the family's parameters, summed over the blocks.
// The gradients are the explicit path's (each block's are, and the blocks' sum is theirs); the
// forward must compute the same function as the rows (tests/unit/recomputed_attention_test.cpp
// holds every tile family to that in double). No randomness: callers use it without dropout.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace roformer::model {

// The attention output [B, H, S, D] for q, k, v [B, H, S, D] and the family's layer state.
using AttentionForward = std::function<torch::Tensor(const torch::Tensor& q, const torch::Tensor& k,
                                                     const torch::Tensor& v, const torch::Tensor& state)>;
// Its query rows [begin, end), [B, H, end - begin, D], formed with autograd.
using AttentionRows =
    std::function<torch::Tensor(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const torch::Tensor& state, int64_t begin, int64_t end)>;

// forward(q, k, v, state) with a gradient for q, k, v, state (undefined: none) and `parameters`
// (every trainable tensor rows() reads besides those) recomputed through rows() in blocks of
// `block_rows` query rows.
torch::Tensor attention_with_recomputed_gradient(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                                 const torch::Tensor& state,
                                                 const std::vector<torch::Tensor>& parameters, AttentionForward forward,
                                                 AttentionRows rows, int64_t block_rows);

}  // namespace roformer::model
