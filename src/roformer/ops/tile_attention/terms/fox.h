// FoX's tile term (Lin et al., ICLR 2025): the forget gates' decay c_i - c_j added to each tile's
// scores; the checks in fox.cpp, the loop in fox_cpu.cpp.
#pragma once

#include <torch/types.h>

#include "roformer/ops/tile_attention/tile_attention_kernels.h"
#include "roformer/ops/tile_attention/tile_term_properties.h"

namespace roformer::ops {

// FoX: the running sums c of the log forget gates per (batch, head), [B, H, S]; the term of key j
// for query i is c_i - c_j (causal), or -|c_i - c_j| (bidirectional: the decay both ways).
struct FoxTerm {
  torch::Tensor cumulative;
  static constexpr TileTermProperties properties() {
    TileTermProperties p;
    p.cuda = true;
    p.cuda_stick_breaking = true;
    return p;
  }
};

// Checks the term against q [B, H, S, D] and runs the launch with it.
void run_tiles(const FoxTerm& term, const torch::Tensor& q, const TileAttentionLaunch& launch);

}  // namespace roformer::ops
