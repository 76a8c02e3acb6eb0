// PaTH's causal softmax attention in evaluation by LibTorch ops on any device (Yang et al. 2025;
// the family in path.h): the sweep across key blocks with an online softmax, so no [S, S] tensor
// and nothing per distance is kept. Where the CPU's blocks and tiles do not run (a GPU), this
// replaces the explicit scores, whose sweep keeps every distance's score blocks.
#pragma once

#include <torch/types.h>

namespace roformer::model {

// PaTH's blocks as path.h forms them, block-major over n blocks of b tokens (BH = batch x heads):
// each query block's raw scores with its own keys (own [n, BH, b, b], keys after the query 0) and
// its rows carried to its start (rows [n, BH, b, D]; the sweep overwrites them), each key block's
// keys carried to its end (carried [n, BH, b, D]) and its product of transforms (product
// [n, BH, D, D], rows x product), the values (values [n, BH, b, D]) and FoX's running sums (gate
// [n, BH, b]; undefined: none), the last block padded.
struct PathSweepBlocks {
  torch::Tensor own, rows, carried, product, values, gate;
};

// softmax_j(scale (S_ij + c_i - c_j)) v over keys j <= i, S PaTH's raw scores as the blocks give
// them, c the gate -> [n, BH, b, D] block-major (path.h's path_attention_swept lays it out). A
// query block scores its own keys, then each earlier key block from the nearest back: its rows,
// carried to the key block's end, score that block's carried keys, the row's maximum, sum and
// output are rescaled as FlashAttention's online softmax does, and the rows absorb that block's
// product. Every query block that has a key block d back takes step d in one batched product. No
// autograd.
torch::Tensor path_attention_by_sweep(const PathSweepBlocks& blocks, double scale);

}  // namespace roformer::model
