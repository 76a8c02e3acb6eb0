// FIRE's tile term (Li et al., ICLR 2024): its MLP over the log distances as the piecewise-linear
// map ops::fire_bias uses, added to each tile's scores; the tables in fire.cpp, the loop in
// fire_cpu.cpp.
#pragma once

#include <torch/types.h>

#include <vector>

#include "roformer/ops/tile_attention/tile_attention_kernels.h"
#include "roformer/ops/tile_attention/tile_term_properties.h"

namespace roformer::ops {

// FIRE over positions 0..S-1: for a key at or before the query, term(i, j) = slope[h, s] x +
// intercept[h, s] with x = psi(i - j) / (psi(max(i, threshold)) + eps), psi(d) = log(|c d| + 1),
// s the number of kinks below x (ops::fire_bias's map). Bidirectional attention needs the
// second MLP of the keys after the query (FireImpl's future side): x = psi(j - i) /
// (psi(max(S - 1 - i, threshold)) + eps) through the future kinks, slopes and intercepts.
struct FireTerm {
  double c = 0, threshold = 0, eps = 0;
  torch::Tensor kinks;                                         // [W] ascending
  torch::Tensor slope, intercept;                              // [H, W + 1]
  torch::Tensor future_kinks, future_slope, future_intercept;  // [V], [H, V + 1]; undefined: causal only
  // Training: c and the threshold as 0-dim tensors (their values c and threshold above) whose
  // gradients the backward in tiles returns; undefined: none.
  torch::Tensor c_tensor, threshold_tensor;
  // A function of the distance and the query's position alone.
  static constexpr TileTermProperties properties() {
    TileTermProperties p;
    p.positions_only = true;
    p.tile_backward = true;
    p.cuda = true;
    p.cuda_stick_breaking = true;
    return p;
  }
};

// Checks the term against q [B, H, S, D], forms its tables and runs the launch with it.
void run_tiles(const FireTerm& term, const torch::Tensor& q, const TileAttentionLaunch& launch);

// The term's tensors that take a gradient: slope, intercept, future_slope, future_intercept,
// c_tensor, threshold_tensor (undefined where the term has none). The kinks take none: the
// piecewise map is continuous at them.
std::vector<torch::Tensor> grad_tensors(const FireTerm& term);

// The backward launch with the term: the gradients of grad_tensors(term), in their order.
std::vector<torch::Tensor> run_tile_grads(const FireTerm& term, const torch::Tensor& q,
                                          const TileAttentionLaunch& launch, const TileAttentionGrad& grad);

}  // namespace roformer::ops
