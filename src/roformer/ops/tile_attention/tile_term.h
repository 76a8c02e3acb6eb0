// The term a position family hands tile attention: one of the terms in terms/ (this file's list),
// plus the queries and keys a family that rotates q and k itself scores with. Adding a term is
// its four files in terms/ (the public struct with its properties and run_tiles, its tables and
// checks, its tables as the loop reads them, its loop) and one entry in TileTermForm; a backward
// in tiles is its grad_tensors and run_tile_grads, the loop's grad_ hooks and tile_backward.
#pragma once

#include <torch/types.h>

#include <variant>

#include "roformer/ops/tile_attention/terms/buckets.h"
#include "roformer/ops/tile_attention/terms/cope.h"
#include "roformer/ops/tile_attention/terms/fire.h"
#include "roformer/ops/tile_attention/terms/fox.h"
#include "roformer/ops/tile_attention/terms/path.h"
#include "roformer/ops/tile_attention/terms/relative.h"
#include "roformer/ops/tile_attention/tile_term_properties.h"

namespace roformer::ops {

// Nothing beyond q . k (or the rotations' scores below).
struct NoTerm {
  static constexpr TileTermProperties properties() {
    TileTermProperties p;
    p.tile_backward = true;
    p.cuda = true;
    p.cuda_stick_breaking = true;
    return p;
  }
};

using TileTermForm = std::variant<NoTerm, FireTerm, CopeTerm, FoxTerm, RelativeTerm, BucketTerm, PathTerm>;

// The family's term for one layer.
struct TileTerm {
  // Added to each tile's scores (or, with properties().forms_scores, forming them).
  TileTermForm added;
  // A family that rotates q and k itself: the queries and keys to score with instead of
  // attention's, [B, H, S, D] each, or undefined.
  torch::Tensor q, k;
  // Two rotations, causal: a pair at distance i - j >= far_threshold scores far_q_i . far_k_j
  // instead, [B, H, S, D] each; undefined: every pair is near.
  torch::Tensor far_q, far_k;
  double far_threshold = 0;
  // Chunks instead, causal: with chunk > 0 a pair's chunk gap floor(i / chunk) - floor(j / chunk)
  // picks q . k (0), mid_q . k (1) or far_q . far_k (2 or more); mid_q [B, H, S, D].
  int64_t chunk = 0;
  torch::Tensor mid_q;
  double score_factor = 1;  // on the scale (a rotation's attention factor, squared)
};

// The properties of the term's form (its type's properties()).
inline TileTermProperties tile_term_properties(const TileTermForm& form) {
  return std::visit([](const auto& t) { return std::decay_t<decltype(t)>::properties(); }, form);
}

}  // namespace roformer::ops
