// Public API of tile attention (evaluation, and the forward of training whose gradient the model
// recomputes): softmax(q k^T scale + term) v with queries and keys in tiles, an online softmax and
// the position family's term computed per tile in cache, causal or bidirectional, so no S x S
// score, bias or term tensor is ever formed and the work per pair is one pass over a tile that stays in L1/L2 (the
// FlexAttention score_mod idea on the CPU). The terms are tile_term.h's list, each whole in
// terms/; scores may also come from a second rotation of q and k past a distance or by chunks,
// each tile forming the product it needs; right padding as per-row key lengths. CPU, float32 /
// float64, no autograd. Knows nothing of configs or families: a family describes its term
// (TileTerm) and attention calls this.
#pragma once

#include <torch/types.h>

#include "roformer/ops/tile_attention/tile_term.h"

namespace roformer::ops {

// How a row's scores become weights: softmax, or stick-breaking (Tan et al., ICLR 2025; strictly
// causal: w_ij = sigmoid(z_ij) prod_{j<t<i} (1 - sigmoid(z_it)), no normaliser) with the weight the
// sticks leave, 1 - sum_j w_ij, dropped or put on the query's own value.
enum class TileNormalizer { softmax, stick_breaking, stick_breaking_remainder_to_query };

// Whether tile_attention takes [B, H, S, D] tensors of head dimension D and this dtype on this
// device (the shape part of tile_attention_supports).
bool tile_attention_shape_supported(int64_t head_dim, torch::ScalarType dtype, const torch::Device& device);

// Whether tile_attention takes these tensors: [B, H, S, D] CPU tensors of one dtype (float32 or
// float64), equal shapes, q and v with unit stride along D, D a positive multiple of 8 up to 512.
bool tile_attention_supports(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

// softmax(q k^T scale + term (+ the causal mask)) v: [B, H, S, D], its memory in [B, S, H, D]
// order. Without `causal` every key is visible (bidirectional): a term whose properties say
// bidirectional (its tables then cover keys after the query), softmax, no rotations. key_lengths: int64 [B], each in
// [1, S], the keys [0, length) each batch row has (right padding: the later keys are hidden from
// every query, as a padding mask hides them); undefined: all S (a term without the key_lengths
// property takes none). Refuses inputs that require a gradient while autograd is on (a training
// caller runs it without autograd and recomputes its gradient).
torch::Tensor tile_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                             bool causal, const TileTerm& term, TileNormalizer normalizer = TileNormalizer::softmax,
                             const torch::Tensor& key_lengths = torch::Tensor());

}  // namespace roformer::ops
