// PaTH's attention in blocks (Yang et al. 2025; the family in model/position/path.h): the causal
// softmax over PaTH's scores and its weighted values, formed block by block from the blocks
// PaTH's UT transform hands over, with its backward in the same blocks (FlashAttention's
// recomputation), so training at any length forms no [S, S] tensor. A query block scores its
// own keys from `own`, then walks back: its rows, carried to the block's start, score the carried
// keys of the block before, take that block's product of transforms, and so on to the first.
// CPU, float or double; other devices keep PaTH's explicit scores.
#pragma once

#include <torch/types.h>

namespace roformer::ops {

// Block-major [n, B * H, ...] as PaTH's key blocks, n blocks of b tokens (the last padded).
struct PathBlocks {
  torch::Tensor own;      // [n, BH, b, b]: each query block's raw scores with its own keys (j <= i read)
  torch::Tensor rows;     // [n, BH, b, D]: each query block's rows carried to its block's start
  torch::Tensor carried;  // [n, BH, b, D]: each key block's keys carried to its block's end
  torch::Tensor product;  // [n, BH, D, D]: each block's product of transforms, applied as rows x product
};

// PaTH's blocks from q, k [B, H, S, D] and PaTH's layer state [B, H, S, > D] (w, unit rows, its
// first D columns and beta the next; columns after those are not read and get zero gradients),
// blocks of min(block, S rounded up to 8) tokens: what model/position/path.h's path_key_blocks and
// path_query_blocks form, in one pass per (batch x head, block); differentiable in all three. Any
// strides with contiguous rows are read in place (the projections' [B, S, H, D] views), and the
// gradients handed back are laid out [B, S, H, ...] the same way.
PathBlocks path_blocks(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& state, int64_t block);

// Whether the blocks take this pass: the CPU, float or double, b and D multiples of 8.
bool path_block_attention_takes(const torch::Tensor& v, int64_t block);

// softmax_j(scale (S_ij + c_i - c_j)) over keys j <= i, times v [B, H, S, D] -> [B, H, S, D]: S the
// blocks' raw scores, c (gate [B, H, S]) FoX's running sums or undefined. Differentiable in every
// tensor of `blocks`, v and gate; v read in place as in path_blocks, the output laid out [B, S, H, D].
torch::Tensor path_block_attention(const PathBlocks& blocks, const torch::Tensor& v, const torch::Tensor& gate,
                                   double scale);

}  // namespace roformer::ops
