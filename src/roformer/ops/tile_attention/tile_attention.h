// Public API of tile attention (evaluation, and the forward of training whose gradient the model
// recomputes): softmax(q k^T scale + term) v with queries and keys in tiles, an online softmax and
// the position family's term computed per tile in cache, causal or bidirectional, so no S x S
// score, bias or term tensor is ever formed and the work per pair is one pass over a tile that stays in L1/L2 (the
// FlexAttention score_mod idea on the CPU). The terms are tile_term.h's list, each whole in
// terms/; scores may also come from a second rotation of q and k past a distance or by chunks,
// each tile forming the product it needs; right padding as per-row key lengths. CPU, float32 /
// float64; CUDA tensors go to the CUDA kernel (evaluation; the terms whose properties say cuda;
// tile_attention_cuda_launch.h). tile_attention itself has no autograd; for softmax and the terms with a
// backward in tiles (no rotations), tile_attention_trainable differentiates it in tiles too. Knows nothing of configs
// or families: a family describes its term (TileTerm) and attention calls this.
#pragma once

#include <torch/types.h>

#include <utility>
#include <vector>

#include "roformer/ops/tile_attention/tile_term.h"

namespace roformer::ops {

// How a row's scores become weights: softmax, or stick-breaking (Tan et al., ICLR 2025; strictly
// causal: w_ij = sigmoid(z_ij) prod_{j<t<i} (1 - sigmoid(z_it)), no normaliser) with the weight the
// sticks leave, 1 - sum_j w_ij, dropped or put on the query's own value.
enum class TileNormalizer { softmax, stick_breaking, stick_breaking_remainder_to_query };

// Whether tile_attention takes [B, H, S, D] tensors of head dimension D and this dtype on this
// device (the shape part of tile_attention_supports).
bool tile_attention_shape_supported(int64_t head_dim, torch::ScalarType dtype, const torch::Device& device);

// k (or v) [B, H, S, D] as the CPU kernels read keys for their products: [B, H, D, ld]
// contiguous, zero past S (ld >= S).
torch::Tensor transposed_keys(const torch::Tensor& k, int64_t ld);

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

// tile_attention, and with keep_lse (softmax only) each row's log-sum-exp of its scores, [B, H, S]
// (undefined without).
std::pair<torch::Tensor, torch::Tensor> tile_attention_with_lse(const torch::Tensor& q, const torch::Tensor& k,
                                                                const torch::Tensor& v, double scale, bool causal,
                                                                const TileTerm& term, TileNormalizer normalizer,
                                                                const torch::Tensor& key_lengths, bool keep_lse);

// CUDA tile attention (tile_attention_cuda_launch.h), evaluation only: whether it takes [B, H, S, D]
// tensors of head dimension D and this dtype on this device (D 64 or 128; float32, and bfloat16 on
// compute capability 8.0+; false in a build without CUDA kernels), and whether it takes these
// tensors (one device and dtype, equal shapes, unit stride along D).
bool tile_attention_cuda_shape_supported(int64_t head_dim, torch::ScalarType dtype, const torch::Device& device);
bool tile_attention_cuda_supports(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

// tile_attention_with_lse on CUDA tensors (it dispatches there): no term, FoX's, FIRE's,
// DeBERTa's buckets or a relative table (softmax), causal or bidirectional, and CoPE's, causal;
// right padding as key lengths;
// softmax, or stick-breaking (causal); the rotations and chunks of RoPE's remaps (causal, softmax).
// The log-sum-exp (softmax only) in float32.
std::pair<torch::Tensor, torch::Tensor> tile_attention_cuda_with_lse(const torch::Tensor& q, const torch::Tensor& k,
                                                                     const torch::Tensor& v, double scale, bool causal,
                                                                     const TileTerm& term, TileNormalizer normalizer,
                                                                     const torch::Tensor& key_lengths, bool keep_lse);

// softmax(q k^T scale + bias (+ the causal mask)) v on CUDA tensors in tiles, the relative bias of
// ALiBi, T5, KERPLE or Sandwich read per score from its rows [H or 1, 2S - 1] (column S - 1 +
// j - i for key j and query i, the attention mask's relative_bias()), so no S x S mask exists;
// a right padding as key lengths [B] (or undefined: none). Evaluation only.
torch::Tensor tile_attention_bias(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                                  bool causal, const torch::Tensor& bias_rows,
                                  const torch::Tensor& key_lengths = torch::Tensor());

// Whether the backward in tiles takes the term under the normaliser: its type has one for it
// (TileTermProperties::trains_in_tiles), no rotations.
bool tile_attention_trains(const TileTerm& term, TileNormalizer normalizer = TileNormalizer::softmax);

// The term's tensors that take a gradient in the backward in tiles, in tile_attention_backward's
// order (some may be undefined).
std::vector<torch::Tensor> tile_term_grad_tensors(const TileTerm& term);

// The gradients of softmax attention in tiles: q's and k's (the term's scoring q and k where it
// replaces them), v's, and those of tile_term_grad_tensors(term) (undefined where it is).
struct TileAttentionGrads {
  torch::Tensor q, k, v;
  std::vector<torch::Tensor> term;
};

// The backward of tile_attention_with_lse, from its output, the output's gradient and (softmax)
// its log-sum-exp: per tile the scores recomputed, then FlashAttention-2's products (for
// stick-breaking, its weights' gradients in one scan per row from the query back) and the term's
// gradients, so no [S, S] tensor is formed. No autograd (tile_attention_trainable wraps it).
TileAttentionGrads tile_attention_backward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                           double scale, bool causal, const TileTerm& term, TileNormalizer normalizer,
                                           const torch::Tensor& key_lengths, const torch::Tensor& out,
                                           const torch::Tensor& lse, const torch::Tensor& grad_out);

// tile_attention differentiable in q, k, v (or the term's scoring q and k) and the term's tensors,
// its backward in tiles: memory linear in S in training too. The term's tensors may carry
// autograd graphs (a family's tables formed from its parameters). Requires
// tile_attention_trains(term).
torch::Tensor tile_attention_trainable(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       double scale, bool causal, const TileTerm& term,
                                       TileNormalizer normalizer = TileNormalizer::softmax,
                                       const torch::Tensor& key_lengths = torch::Tensor());

}  // namespace roformer::ops
