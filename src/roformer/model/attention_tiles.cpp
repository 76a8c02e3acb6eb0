// The attention paths that run the family's term inside a kernel (see attention.h): tile
// attention over whole rows (differentiated in the tiles, or its gradient recomputed per block
// of query rows), over packed documents one piece at a time, and the short kernel with the term.
#include <torch/torch.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "roformer/model/attention.h"
#include "roformer/model/attention_kernel.h"
#include "roformer/ops/tile_attention/tile_attention.h"

namespace roformer::model {

std::optional<ops::TileTerm> AttentionImpl::tile_term(const torch::Tensor& q, const torch::Tensor& k,
                                                      const AttentionContext& ctx, const torch::Tensor& state) {
  // A layer whose scores only stick-breaking forms (over RoPE or none) scores q.k alone.
  if (!position_->traits().forms_scores) return ops::TileTerm{};
  return position_->tile_term(q, k, ctx.positions, layer_, state, ctx.causal);
}

torch::Tensor AttentionImpl::attend_in_tiles(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                             const AttentionContext& ctx, const torch::Tensor& state) {
  const torch::Tensor key_lengths = ctx.mask.defined() ? ctx.mask.key_lengths() : torch::Tensor();
  using ops::TileNormalizer;
  const TileNormalizer normalizer = normalizer_ == config::AttentionNormalizer::softmax ? TileNormalizer::softmax
                                    : remainder_ == config::StickBreakingRemainder::discard
                                        ? TileNormalizer::stick_breaking
                                        : TileNormalizer::stick_breaking_remainder_to_query;
  // A family's own blocks in training (evaluation keeps the tiles: as fast for PaTH at 16384 tokens,
  // in less memory); the same with autograd on and off, as activation checkpointing needs.
  if (is_training() && ctx.causal && normalizer == TileNormalizer::softmax && !key_lengths.defined())
    if (std::optional<torch::Tensor> out =
            position_->attend_in_blocks(q, k, v, state, position_->score_scale(head_dim_))) {
      record_kernel(attention_kernel::kTile);
      return *out;
    }
  // A term with a backward in tiles (or stick-breaking's scores alone): its tables keep their
  // graphs and the op differentiates them.
  const auto& properties = position_->traits().term;
  const bool backward_in_tiles = properties && properties->trains_in_tiles(normalizer == TileNormalizer::softmax);
  if (torch::GradMode::is_enabled() && (!position_->traits().forms_scores || backward_in_tiles)) {
    const std::optional<ops::TileTerm> term = tile_term(q, k, ctx, state);
    if (term && ops::tile_attention_trains(*term, normalizer)) {
      record_kernel(attention_kernel::kTile);
      return ops::tile_attention_trainable(q, k, v, position_->score_scale(head_dim_), ctx.causal, *term, normalizer,
                                           key_lengths);
    }
  }
  std::optional<ops::TileTerm> term;
  {
    torch::NoGradGuard no_grad;  // the term's tables are plain tensors; backward recomputes the rows
    term = tile_term(q, k, ctx, state);
  }
  if (!term) return attend_explicit(q, k, v, ctx, state);  // the family has no tile form for this pass
  record_kernel(attention_kernel::kTile);
  AttentionForward forward = [term = *term, scale = position_->score_scale(head_dim_), causal = ctx.causal, normalizer,
                              key_lengths](const torch::Tensor& tq, const torch::Tensor& tk, const torch::Tensor& tv,
                                           const torch::Tensor& /*state: in the term*/) {
    return ops::tile_attention(tq, tk, tv, scale, causal, term, normalizer, key_lengths);
  };
  if (!torch::GradMode::is_enabled()) return forward(q, k, v, state);
  return tiles_with_recomputed_gradient(q, k, v, ctx, state, std::move(forward));
}

torch::Tensor AttentionImpl::tiles_with_recomputed_gradient(const torch::Tensor& q, const torch::Tensor& k,
                                                            const torch::Tensor& v, const AttentionContext& ctx,
                                                            const torch::Tensor& state, AttentionForward forward) {
  const std::vector<torch::Tensor> parameters = position_->parameters();
  auto needs = [](const torch::Tensor& t) { return t.defined() && t.requires_grad(); };
  if (!needs(q) && !needs(k) && !needs(v) && !needs(state) &&
      std::none_of(parameters.begin(), parameters.end(), needs)) {
    torch::NoGradGuard no_grad;
    return forward(q, k, v, state);
  }
  const int64_t B = q.size(0), H = q.size(1), S = q.size(2);
  // Blocks of the scores' bytes that stay below the heap's mmap threshold, or the encoder's blocks if smaller.
  int64_t block =
      query_block_rows(double(B * H * S) * double(q.element_size()), S, AttentionMask::kCpuBlockBytes, q.device());
  if (ctx.score_block_rows > 0) block = std::min(block, ctx.score_block_rows);
  AttentionRows rows = [this, ctx](const torch::Tensor& rq, const torch::Tensor& rk, const torch::Tensor& rv,
                                   const torch::Tensor& rstate, int64_t begin,
                                   int64_t end) { return attend_rows_with_terms(rq, rk, rv, ctx, rstate, begin, end); };
  return attention_with_recomputed_gradient(q, k, v, state, parameters, std::move(forward), std::move(rows), block);
}

torch::Tensor AttentionImpl::attend_short_with_term(const torch::Tensor& q, const torch::Tensor& k,
                                                    const torch::Tensor& v, const AttentionContext& ctx,
                                                    const torch::Tensor& state) {
  const std::optional<ops::TileTerm> term = tile_term(q, k, ctx, state);
  if (!term) return attend_explicit(q, k, v, ctx, state);  // the family has no tile form for this pass
  record_kernel(attention_kernel::kShort);
  return position_->short_attention_with_term(q, k, v, *term, position_->score_scale(head_dim_), ctx.causal);
}

// Packed documents: each row's document pieces (runs of one segment) attend in tiles as
// sequences of their own, with their own positions and state; the document mask, which hides
// every other piece's keys, is what this computes, without scoring a pair across pieces.
torch::Tensor AttentionImpl::attend_documents_in_tiles(const torch::Tensor& x, const torch::Tensor& q,
                                                       const torch::Tensor& k, const torch::Tensor& v,
                                                       const AttentionContext& ctx) {
  const torch::Tensor segments = ctx.segments.to(torch::kCPU, torch::kLong).contiguous();
  const int64_t B = q.size(0), S = q.size(2);
  std::vector<torch::Tensor> rows;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t* seg = segments.data_ptr<int64_t>() + b * S;
    std::vector<torch::Tensor> pieces;
    for (int64_t begin = 0, end = 0; begin < S; begin = end) {
      for (end = begin + 1; end < S && seg[end] == seg[begin];) ++end;
      auto piece = [&](const torch::Tensor& t, int64_t dim) {
        return t.narrow(0, b, 1).narrow(dim, begin, end - begin);
      };
      AttentionContext own;
      own.positions = piece(ctx.positions, 1).reshape({end - begin});
      own.causal = ctx.causal;
      const torch::Tensor pk = piece(k, 2);
      const torch::Tensor state = position_->layer_state(piece(x, 1), pk, own.positions, layer_, {});
      pieces.push_back(attend_in_tiles(piece(q, 2), pk, piece(v, 2), own, state));
    }
    rows.push_back(pieces.size() == 1 ? pieces.front() : torch::cat(pieces, 2));
  }
  return B == 1 ? rows.front() : torch::cat(rows, 0);
}

}  // namespace roformer::model
