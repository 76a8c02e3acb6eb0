// The tile term of a table of relative embeddings (Transformer-XL's projected sinusoids, Shaw's
// a^K and a^V): per key tile one product of the rows' queries with the table rows of the tile's
// distances; the checks in relative.cpp, the loop in relative_cpu.cpp.
#pragma once

#include <torch/types.h>

#include <vector>

#include "roformer/ops/tile_attention/tile_attention_kernels.h"
#include "roformer/ops/tile_attention/tile_term_properties.h"

namespace roformer::ops {

// A relative table: scale x q_i . table[h, origin + i - j], q [B, H, S, D] and table
// [H, >= origin + S, D] (row origin + d for distance d = i - j). Causal attention reads the rows
// from `origin` on; bidirectional attention also the keys after the query, so it needs
// origin >= S - 1. With value_table, indexed alike, each output also gains
// sum_j w_ij value_table[h, origin + i - j]; undefined: none.
struct RelativeTerm {
  torch::Tensor q, table, value_table;
  int64_t origin = 0;
  static constexpr TileTermProperties properties() {
    TileTermProperties p;
    p.tile_backward = true;
    p.cuda = true;  // softmax only
    return p;
  }
};

// Checks the term against q [B, H, S, D] and runs the launch with it.
void run_tiles(const RelativeTerm& term, const torch::Tensor& q, const TileAttentionLaunch& launch);

// The term's tensors that take a gradient: q, table, value_table (undefined without one).
std::vector<torch::Tensor> grad_tensors(const RelativeTerm& term);

// The backward launch with the term: the gradients of grad_tensors(term), in their order and
// shapes (undefined for an undefined tensor).
std::vector<torch::Tensor> run_tile_grads(const RelativeTerm& term, const torch::Tensor& q,
                                          const TileAttentionLaunch& launch, const TileAttentionGrad& grad);

}  // namespace roformer::ops
