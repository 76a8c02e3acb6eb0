// PaTH's tile term (Yang et al. 2025): scores formed by a Householder walk from each query's
// diagonal back, not by q k^T; the checks in path.cpp, the loop in path_cpu.cpp.
#pragma once

#include <torch/types.h>

#include "roformer/ops/tile_attention/tile_attention_kernels.h"
#include "roformer/ops/tile_attention/tile_term_properties.h"

namespace roformer::ops {

// PaTH, causal: the score of query i and key j is q_i . (H_i H_{i-1} ... H_{j+1} k_j) with
// H_t = I - beta_t w_t w_t^T, plus, with forget_gate, FoX's c_i - c_j (before the scale);
// state [B, H, S, D + 2] holds w_t (D), beta_t and c_t (PathImpl::layer_state's layout).
struct PathTerm {
  torch::Tensor state;
  bool forget_gate = false;
  // Its walk passes every position (no key lengths); its tiles train slower than its explicit
  // scores (docs/performance.md).
  static constexpr TileTermProperties properties() {
    TileTermProperties p;
    p.key_lengths = false;
    p.trains_faster_in_tiles = false;
    p.forms_scores = true;
    p.bidirectional = false;
    return p;
  }
};

// Checks the term against q [B, H, S, D] and runs the launch with it.
void run_tiles(const PathTerm& term, const torch::Tensor& q, const TileAttentionLaunch& launch);

}  // namespace roformer::ops
