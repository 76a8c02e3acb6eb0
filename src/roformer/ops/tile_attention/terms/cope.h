// CoPE's tile term (Golovneva et al. 2024): each query's gates counted from its diagonal back and
// its position table interpolated at the count, added to each tile's scores; the checks in
// cope.cpp, the loop in cope_cpu.cpp.
#pragma once

#include <torch/types.h>

#include <memory>
#include <vector>

#include "roformer/ops/tile_attention/tile_attention_kernels.h"
#include "roformer/ops/tile_attention/tile_term_properties.h"

namespace roformer::ops {

// CoPE, causal: q_i . e[p] for p = 0..P-1 per query row, [B, H, S, P]; the term of key j is that
// row interpolated at min(sum_{t=j..i} sigmoid(score_it), P - 1) (ops::cope_term's map).
struct CopeTerm {
  torch::Tensor at_integers;
  // Each row's gate total, [B, H, S]: the forward's, kept for the backward of the same term (its
  // copies share it), which then need not count the gates again. Written into the tensor already
  // here where it has the launch's shape and dtype (ops::causal_table_products reads it too).
  std::shared_ptr<torch::Tensor> totals = std::make_shared<torch::Tensor>();
  // ops::short_attention_cope computes the same term in its rows.
  static constexpr TileTermProperties properties() {
    TileTermProperties p;
    p.short_kernel = true;
    p.bidirectional = false;
    p.tile_backward = true;
    p.backward_softmax_only = true;  // its backward visits keys from 0 up; stick-breaking's from the query back
    p.cuda = true;
    p.cuda_stick_breaking = true;
    return p;
  }
};

// Checks the term against q [B, H, S, D] and runs the launch with it.
void run_tiles(const CopeTerm& term, const torch::Tensor& q, const TileAttentionLaunch& launch);

// The term's tensors that take a gradient: at_integers.
std::vector<torch::Tensor> grad_tensors(const CopeTerm& term);

// The backward launch with the term: the gradient of at_integers.
std::vector<torch::Tensor> run_tile_grads(const CopeTerm& term, const torch::Tensor& q,
                                          const TileAttentionLaunch& launch, const TileAttentionGrad& grad);

}  // namespace roformer::ops
