// Public API of tile attention (evaluation, and the forward of training whose gradient the model
// recomputes): softmax(q k^T scale + term) v with queries and keys
// in tiles, an online softmax and the position family's term computed per tile in cache, so no
// S x S score, bias or term tensor is ever formed and the work per pair is one pass over a tile
// that stays in L1/L2 (the FlexAttention score_mod idea on the CPU). Terms: none, FIRE (its MLP
// as a piecewise-linear map of the distances' logarithms), CoPE (gates counted from each
// query's diagonal back, its position table interpolated), FoX (the forget gates' decay), a
// table of relative embeddings (Transformer-XL, Shaw), bucketed tables (DeBERTa) and PaTH's
// Householder products (scores formed by a walk from the diagonal back, not by q k^T); and
// scores from a second rotation of q and k past a distance (the RoPE remaps), each tile forming
// the product it needs (both only where the threshold crosses the tile); right padding as per-row
// key lengths. CPU, float32 / float64, no autograd. Knows nothing of configs; the families describe their term
// (TileTerm) and attention calls it.
#pragma once

#include <torch/types.h>

namespace roformer::ops {

// The family's term for one layer.
struct TileTerm {
  enum class Kind { none, fire, cope, fox, relative, buckets, path };
  Kind kind = Kind::none;
  // FIRE over positions 0..S-1, causal: term(i, j) = slope[h, s] x + intercept[h, s] with
  // x = psi(i - j) / (psi(max(i, threshold)) + eps), psi(d) = log(|c d| + 1), s the number of
  // kinks below x (ops::fire_bias's map).
  double fire_c = 0, fire_threshold = 0, fire_eps = 0;
  torch::Tensor fire_kinks;                  // [W] ascending
  torch::Tensor fire_slope, fire_intercept;  // [H, W + 1]
  // CoPE, causal: q_i . e[p] for p = 0..P-1 per query row, [B, H, S, P]; the term of key j is
  // that row interpolated at min(sum_{t=j..i} sigmoid(score_it), P - 1) (ops::cope_term's map).
  torch::Tensor cope_at_integers;
  // FoX, causal: the running sums c of the log forget gates per (batch, head), [B, H, S]; the term
  // of key j for query i is c_i - c_j.
  torch::Tensor fox_cumulative;
  // A relative table, causal: scale x relative_q_i . relative_table[h, i - j], relative_q
  // [B, H, S, D] and relative_table [H, S, D] (row d for distance d; Transformer-XL's projected
  // sinusoids). Each tile forms its products with the table rows of its distances at once.
  torch::Tensor relative_q, relative_table;
  // With it, a relative value table [H, >= S, D] (Shaw's a^V): each output gains
  // sum_j w_ij relative_value_table[h, i - j]; undefined: none.
  torch::Tensor relative_value_table;
  // Bucketed query and key tables (DeBERTa's c2p and p2c), causal: scale x (by_query[b, h, i,
  // query_bucket[i - j]] + by_key[b, h, key_bucket[i - j], j]); by_query [B, H, S, R], by_key
  // [B, H, R, S], the buckets int64 [S] (indices in [0, R), by distance).
  torch::Tensor by_query, by_key, query_bucket, key_bucket;
  // A family that rotates q and k itself (the RoPE remaps): the queries and keys to score with
  // instead of attention's, [B, H, S, D] each, or undefined.
  torch::Tensor q, k;
  // Two rotations (ReRoPE, STRING, Self-Extend), causal: a pair at distance i - j >= far_threshold
  // scores far_q_i . far_k_j instead, [B, H, S, D] each; undefined: every pair is near.
  torch::Tensor far_q, far_k;
  double far_threshold = 0;
  // Chunks instead (Dual Chunk Attention), causal: with chunk > 0 a pair's chunk gap
  // floor(i / chunk) - floor(j / chunk) picks q . k (0), mid_q . k (1) or far_q . far_k (2 or more);
  // mid_q [B, H, S, D].
  int64_t chunk = 0;
  torch::Tensor mid_q;
  // PaTH, causal: the score of query i and key j is q_i . (H_i H_{i-1} ... H_{j+1} k_j) with
  // H_t = I - beta_t w_t w_t^T, plus, with path_forget_gate, FoX's c_i - c_j (before the scale);
  // path_state [B, H, S, D + 2] holds w_t (D), beta_t and c_t (PathImpl::layer_state's layout).
  torch::Tensor path_state;
  bool path_forget_gate = false;
  double score_factor = 1;  // on the scale (STRING's attention factor, squared)
};

// What a caller may ask of a term without forming it: properties of its kind, so the caller
// (attention's plan) chooses a kernel path without naming a family.
struct TileTermProperties {
  bool key_lengths = true;             // takes right padding as key lengths (PaTH's walk passes every position: no)
  bool short_kernel = false;           // ops::short_attention computes it in its rows too (the counted-position table)
  bool positions_only = false;         // reads neither the scores nor q and k: SDPA may take it as an additive mask
  bool trains_faster_in_tiles = true;  // its tiles, recomputed in backward, beat its explicit scores in training
};
TileTermProperties tile_term_properties(TileTerm::Kind kind);

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
// order. Every term but none, and stick-breaking, need `causal`. key_lengths: int64 [B], each in
// [1, S], the keys [0, length) each batch row has (right padding: the later keys are hidden from
// every query, as a padding mask hides them); undefined: all S (PaTH takes none: its walk passes
// every position). Refuses inputs that require a gradient while autograd is on (a training
// caller runs it without autograd and recomputes its gradient).
torch::Tensor tile_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                             bool causal, const TileTerm& term, TileNormalizer normalizer = TileNormalizer::softmax,
                             const torch::Tensor& key_lengths = torch::Tensor());

}  // namespace roformer::ops
