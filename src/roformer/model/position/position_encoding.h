// The position-encoding seam: every family is one module with these hooks, and attention and
// the encoder never branch on the family.
//   embed:       absolute families add to the token embeddings      x: [B, S, E]
//   rotate:      RoPE/xPos rotate queries/keys (optionally values)   q, k, v: [B, H, S, D]
//   relative_bias: additive per-head score bias by key - query offset -> [H, 2S - 1]
//   content_scores: the scaled q.k scores of query rows when attention forms them (a family
//                that picks a relative position per pair, ReRoPE, forms them itself)
//   layer_state: what a family derives once per layer, before any block of query rows, from
//                the layer's input (FoX's forget gates) or its keys (ReRoPE's rotated keys,
//                DeBERTa's keys against the position embeddings)
//   score_term:  a term added to the scores, per layer and query rows: from q and k (Shaw,
//                Transformer-XL, DeBERTa), the scores themselves (CoPE), the positions (FIRE)
//                or the layer's input through layer_state (FoX's forget gates)
//   output_term: a term from the attention weights (Shaw's relative values)
// What attention must know about a family beyond that math is one Traits value, set by the
// family's constructor: whether attention forms the scores (content_scores, score_term and
// output_term are then called), how its rotation may be fused and the kind of its tile term. (Its length limit is the
// family row's, config/position_families.h.)
// Families that form no scores keep SDPA.
// positions: int64, [S] = 0..S-1 shared by the batch (what the encoder passes, so tables for
// it can be cached per length), or explicit [B, S].
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include "roformer/config/config.h"
#include "roformer/ops/tile_attention/tile_attention.h"

namespace roformer::model {

class PositionEncodingImpl : public torch::nn::Module {
 public:
  // How an attention kernel that rotates q and k as it reads them (ops::short_attention_qkv) may
  // stand in for rotate(): `applied` (the default, so a family that rotates is never skipped by
  // mistake): rotate() must run, nothing is fused; `none`: rotate() does nothing, so the kernel
  // may run without tables; `tables`: the kernel applies rotation_tables() instead.
  enum class Rotation { applied, none, tables };
  struct Traits {
    bool forms_scores = false;  // attention forms the scores and calls content_scores, score_term, output_term
    Rotation rotation = Rotation::applied;
    // The hooks take a prefix of the keys: k [B, H, K, D] holding keys [0, K) of the S in
    // `positions` (causal rows need no later key, so attention passes K = the rows' end).
    bool keys_prefix = true;
    // The properties of the term tile_term forms (its type's properties(): what attention's plan
    // asks of it), or none where the family has no tile form.
    std::optional<ops::TileTermProperties> term;
    // Causal, its term is a constant per query row plus key_bias(state) per key (FoX's c_i - c_j),
    // so under the softmax, which drops a row's constant, the key bias alone gives the same weights.
    bool causal_key_bias = false;
    // Its scores read the pass's length (STRING's shift, dynamic NTK's and LongRoPE's frequencies),
    // so a packed document's piece of a row does not score as a sequence of its own would.
    bool reads_pass_length = false;
    // It evaluates its causal softmax attention in blocks of its own (evaluate_in_blocks), which
    // attention's plan takes in evaluation where no tiles run.
    bool evaluates_in_blocks = false;
  };
  ~PositionEncodingImpl() override = default;
  const Traits& traits() const { return traits_; }

  // Absolute families add their encoding to x; others return x unchanged.
  virtual torch::Tensor embed(const torch::Tensor& x, const torch::Tensor& positions) { return x; }

  // Rotary families rotate q and k (and v when configured) in place of the inputs.
  virtual void rotate(torch::Tensor& q, torch::Tensor& k, torch::Tensor& v, const torch::Tensor& positions) {}

  // Bias families (T5, ALiBi) return their additive score bias for positions 0..S-1 as one row
  // per head, [H, 2S - 1], column S - 1 + d holding the bias for key - query = d (a bias of the
  // offset alone; attention_mask.h turns it into query rows); others an undefined tensor.
  virtual torch::Tensor relative_bias(int64_t S, const torch::Device& device) { return {}; }

  // The scaled content scores of query rows [begin, end) when attention forms the scores:
  // q [B, H, S, D] (after rotate), k [B, H, K, D] -> [B, H, C, K]; q_rows . k * score_scale here.
  // k holds the keys [0, K), K <= S (all S unless traits().keys_prefix; positions always all S).
  // `state` is layer_state's.
  virtual torch::Tensor content_scores(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& positions,
                                       int64_t begin, int64_t end, const torch::Tensor& state);
  // What a family derives once per layer before any block of query rows, from layer `layer`'s
  // input x [B, S, hidden] (FoX's forget gates) or from all S of its keys k [B, H, S, D] (after
  // rotate): work that would otherwise be repeated per block. Handed back to content_scores and
  // score_term as `state`; undefined when there is none. `segments` [B, S]: packed documents
  // (EncoderInput::segments) that nothing may mix across, or undefined.
  virtual torch::Tensor layer_state(const torch::Tensor& x, const torch::Tensor& k, const torch::Tensor& positions,
                                    int64_t layer, const torch::Tensor& segments) {
    return {};
  }
  // Score term for layer `layer` and query rows [begin, end), added to `scores`, the scaled
  // q.k * score_scale of those rows plus the encoder's mask (-inf where a key is hidden):
  // q [B, H, S, D], k [B, H, K, D] (after rotate; keys [0, K) as for content_scores),
  // scores [B, H, C, K] -> [B|1, H, C, K], C = end - begin;
  // `state` is layer_state's. Attention asks for all rows at once, or for blocks of them at
  // long lengths. Only called when traits().forms_scores; undefined when there is nothing to add.
  virtual torch::Tensor score_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& scores,
                                   const torch::Tensor& positions, int64_t layer, int64_t begin, int64_t end,
                                   const torch::Tensor& state) {
    return {};
  }
  // Bytes the score term holds per (query, key) pair beyond the scores themselves, for a batch
  // of `batch` and `heads` heads with `elem` bytes per element: sizes the blocks of query rows.
  virtual double score_term_bytes_per_pair(int64_t batch, int64_t heads, double elem) const { return 0; }
  // Term added to the attention output of query rows [begin, begin + C) from their weights
  // p [B, H, C, K] over the keys [0, K) -> [B, H, C, D], or undefined.
  virtual torch::Tensor output_term(const torch::Tensor& probs, const torch::Tensor& positions, int64_t layer,
                                    int64_t begin) {
    return {};
  }
  // The score term as tile attention computes it inside each tile (ops/tile_attention): for
  // causal or (where its properties say bidirectional) bidirectional attention over positions
  // 0..S-1 ([S]), its tables formed without autograd (training recomputes the explicit rows in
  // backward); q and k [B, H, S, D] after rotate, `state` layer_state's; of the kind
  // traits().term says. nullopt where the family has no tile form for this pass (attention then
  // forms the scores in blocks of query rows). A term the short kernel computes (its properties'
  // short_kernel) also serves training from it, so its tables must carry autograd.
  virtual std::optional<ops::TileTerm> tile_term(const torch::Tensor& q, const torch::Tensor& k,
                                                 const torch::Tensor& positions, int64_t layer,
                                                 const torch::Tensor& state, bool causal) {
    return std::nullopt;
  }
  // A family that forms its whole causal softmax attention itself in blocks (PaTH):
  // softmax(scores) v for q, k, v [B, H, S, D] after rotate, no padding, `state` layer_state's,
  // differentiable; nullopt where its blocks do not take the pass (tile attention runs instead).
  virtual std::optional<torch::Tensor> attend_in_blocks(const torch::Tensor& q, const torch::Tensor& k,
                                                        const torch::Tensor& v, const torch::Tensor& state,
                                                        double scale) {
    return std::nullopt;
  }
  // traits().evaluates_in_blocks: softmax(scores) v in evaluation (no autograd) for q, k, v
  // [B, H, S, D] after rotate, causal, no padding, `state` layer_state's (PaTH's sweep by
  // LibTorch ops).
  virtual torch::Tensor evaluate_in_blocks(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                           const torch::Tensor& state, double scale) {
    TORCH_CHECK(false, "evaluate_in_blocks: this position family has no blocks of its own");
  }
  // traits().causal_key_bias: the term's part by key, [B, H, S] from layer_state's `state`.
  virtual torch::Tensor key_bias(const torch::Tensor& state) const { return {}; }
  // softmax(q k^T scale + the term) v from ops::short_attention for a term whose properties say
  // short_kernel: q, k, v [B, H, S, D] after rotate, `term` tile_term's (with autograd).
  virtual torch::Tensor short_attention_with_term(const torch::Tensor& q, const torch::Tensor& k,
                                                  const torch::Tensor& v, const ops::TileTerm& term, double scale,
                                                  bool causal);
  // The factor on q.k: 1/sqrt(D), or DeBERTa's 1/sqrt(3D) shared by its three terms.
  virtual double score_scale(int64_t head_dim) const { return 1.0 / std::sqrt(static_cast<double>(head_dim)); }

  // The rotation as an attention kernel applies it, for traits().rotation: [2, S, D] tables of
  // `dtype` for positions [S] (ops::short_attention_rotation) when `tables`, fusable with no
  // tables when `none`, not fusable when `applied`.
  struct FusedRotation {
    bool fusable = false;
    torch::Tensor tables;
    bool interleaved = true;
  };
  FusedRotation fused_rotation(const torch::Tensor& positions, int64_t head_dim, torch::ScalarType dtype) {
    if (traits_.rotation == Rotation::none) return {true};
    return rotation_fusable(positions, head_dim) ? rotation_tables(positions, head_dim, dtype) : FusedRotation{};
  }
  // Whether fused_rotation would be fusable for these positions, without forming its tables.
  bool rotation_fusable(const torch::Tensor& positions, int64_t head_dim) const {
    if (traits_.rotation == Rotation::none) return true;
    return traits_.rotation == Rotation::tables && tables_apply(positions, head_dim);
  }

  // Initialises the family's parameters after build_model's generic N(0, init_std) draw, for
  // families whose papers start elsewhere (FIRE's c and L, KERPLE's r1 and r2, CoPE's zeros).
  virtual void reset_parameters() {}

 protected:
  // Whether a family whose traits say Rotation::tables has tables for these positions.
  virtual bool tables_apply(const torch::Tensor& positions, int64_t head_dim) const { return false; }
  // The tables of a family whose traits say Rotation::tables, where tables_apply.
  virtual FusedRotation rotation_tables(const torch::Tensor& positions, int64_t head_dim, torch::ScalarType dtype) {
    return {};
  }
  Traits traits_;
};

// Builds the family selected by model.position.kind.
std::shared_ptr<PositionEncodingImpl> make_position_encoding(const config::ModelConfig& model);
// Each family's module from the model's settings, defined in the family's own file (declared
// from the list of families, config/families/family_list.h).
#define ROFORMER_POSITION_FACTORY(kind) \
  std::shared_ptr<PositionEncodingImpl> make_##kind##_position(const config::ModelConfig& m);
ROFORMER_POSITION_FAMILIES(ROFORMER_POSITION_FACTORY)
#undef ROFORMER_POSITION_FACTORY

// NoPE: no position information at all (causal masking alone carries order).
class NoPositionImpl : public PositionEncodingImpl {
 public:
  NoPositionImpl() { traits_.rotation = Rotation::none; }
};

}  // namespace roformer::model
