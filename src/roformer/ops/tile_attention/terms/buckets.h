// The tile term of bucketed query and key tables (DeBERTa's c2p and p2c): two gathers per pair
// near the query, one value per row and a row read in order where the buckets stop changing; the
// checks in buckets.cpp, the loop in buckets_cpu.cpp.
#pragma once

#include <torch/types.h>

#include <vector>

#include "roformer/ops/tile_attention/tile_attention_kernels.h"
#include "roformer/ops/tile_attention/tile_term_properties.h"

namespace roformer::ops {

// Bucketed tables: scale x (by_query[b, h, i, query_bucket[origin + i - j]] + by_key[b, h,
// key_bucket[origin + i - j], j]); by_query [B, H, S, R], by_key [B, H, R, S], the buckets int64
// [origin + S] (indices in [0, R), distance d = i - j at origin + d). Causal attention reads them
// from `origin` on; bidirectional attention needs origin = S - 1 (the keys after the query).
struct BucketTerm {
  torch::Tensor by_query, by_key, query_bucket, key_bucket;
  int64_t origin = 0;
  static constexpr TileTermProperties properties() {
    TileTermProperties p;
    p.tile_backward = true;
    p.cuda = true;
    p.cuda_stick_breaking = true;
    return p;
  }
};

// Checks the term against q [B, H, S, D] and runs the launch with it.
void run_tiles(const BucketTerm& term, const torch::Tensor& q, const TileAttentionLaunch& launch);

// The term's tensors that take a gradient: by_query, by_key.
std::vector<torch::Tensor> grad_tensors(const BucketTerm& term);

// The backward launch with the term: the gradients of grad_tensors(term), in their order.
std::vector<torch::Tensor> run_tile_grads(const BucketTerm& term, const torch::Tensor& q,
                                          const TileAttentionLaunch& launch, const TileAttentionGrad& grad);

}  // namespace roformer::ops
