// Multi-head self-attention with Hugging Face RoFormer/BERT parameter names:
//   self.{query,key,value} (Linear H->H), output.dense (Linear H->H), output.LayerNorm.
// Softmax scores go through at::scaled_dot_product_attention; the position encoding's rotate
// hook is applied to q/k/v and its score bias arrives inside the float attention mask (whole,
// or per block of queries at long lengths: attention_mask.h); families with score terms
// (Shaw, Transformer-XL, DeBERTa) get the scores formed explicitly, per block of queries when
// the whole [B, H, S, S] scores would pass the encoder's limit. With
// model.attention=linear the scores are never formed (linear_attention.h): the rotate hook then
// rotates the feature maps of q and k, as RoFormer's Eq. 19 does. The options of 2025 attach
// here: QK-norm before the rotation, SSMax's learned log-n on the queries, stick-breaking in
// place of the softmax (stick_breaking.h), and an output gate before output.dense.
#pragma once

#include <ATen/ops/linear.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <optional>
#include <utility>

#include "roformer/config/config.h"
#include "roformer/model/attention_mask.h"
#include "roformer/model/attention_plan.h"
#include "roformer/model/blocks/norm.h"
#include "roformer/model/position/position_encoding.h"
#include "roformer/model/recomputed_attention.h"

namespace roformer::model {

// A Linear layer applied through ATen's linear op, which autocast sees whole (it casts the bias
// too) and which folds a 3-D input into one matmul with the bias in its epilogue. The module's
// own forward (functional::linear) runs matmul and then `output += bias` for 3-D inputs: under
// CUDA autocast a separate bf16 += fp32 kernel per layer (6 ms of a 36 ms BERT-base step).
inline torch::Tensor dense(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return at::linear(x, layer->weight, layer->bias);
}

class SelfAttentionProjImpl : public torch::nn::Module {
 public:
  // key and value: kv_width = kv_heads x head_dim outputs (grouped-query attention), else hidden.
  SelfAttentionProjImpl(int64_t hidden, int64_t width, int64_t kv_width, bool bias = true);
  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};  // weight [H, H], bias [H]
};
TORCH_MODULE(SelfAttentionProj);

// Everything a layer needs about the current forward pass, computed once by the encoder.
struct AttentionContext {
  torch::Tensor positions;       // int64 [S] or [B, S]
  AttentionMask mask;            // bias + padding + causality, whole or in query-row blocks; or undefined
  bool causal = false;           // used only when `mask` is undefined (fast SDPA path); always by linear attention
  torch::Tensor key_keep;        // [B, S] 1 = token, 0 = padding, or undefined (linear attention's padding)
  int64_t score_block_rows = 0;  // query rows per block when attention forms the scores; 0: all at once
  torch::Tensor query_scale;     // log-n factor per query, [1|B, 1, S, 1], or undefined
  torch::Tensor ssmax_log_keys;  // SSMax: log n, n the keys each query sees, [1|B, 1, S|1, 1], or undefined
  torch::Tensor segments;        // int64 [B, S]: packed documents (EncoderInput::segments), or undefined
};

// SSMax's log n: causal, n = i + 1 for query row i; bidirectional, the sequence's unpadded keys
// (key_keep [B, S], or all S). Float64 [1, 1, S, 1] or [B, 1, 1, 1].
torch::Tensor ssmax_log_keys(int64_t S, bool causal, const torch::Tensor& key_keep, const torch::Device& device);
// The same over packed documents (segments and in-document positions, int64 [B, S]): causal,
// n = the query's position + 1; bidirectional, its document's length. Float64 [B, 1, S, 1].
torch::Tensor ssmax_log_keys_in_documents(const torch::Tensor& segments, const torch::Tensor& positions, bool causal);

// RMSNorm of each head's features with a learned weight per head and feature (QK-norm).
class HeadNormImpl : public torch::nn::Module {
 public:
  HeadNormImpl(int64_t heads, int64_t head_dim, double eps, double offset = 0.0);
  // x [B, heads, S, head_dim] -> normalised x, in x's dtype (computed in fp32 at least).
  torch::Tensor forward(const torch::Tensor& x) const;
  torch::Tensor weight;  // [heads, head_dim], its scale offset + weight (model.norm_weight_offset)
 private:
  double eps_, offset_;
};
TORCH_MODULE(HeadNorm);

// log-n's factor on the query at each position p: max(1, log(p + 1) / log(length)), float64, the
// shape of `positions` (1 for every position inside the length).
torch::Tensor logn_scale(const torch::Tensor& positions, int64_t length);

// Llama 4's temperature on the queries at each position p: log(floor((p + 1) / floor) + 1) x
// factor + 1 (transformers' Llama4TextAttention, attn_temperature_tuning), float64, the shape of
// `positions`.
torch::Tensor llama4_scale(const torch::Tensor& positions, double floor, double factor);

// DroPE's temperature on a pass of S tokens: 1 + c ln(S / length) past the length, 1 within it
// (Gelberg et al. 2025, beta* = 1 + c ln(C_test / C_train)).
double drope_scale(int64_t S, int64_t length, double c);

class AttentionImpl : public torch::nn::Module {
 public:
  // `layer` selects the position family's per-layer parameters (Shaw, Transformer-XL, DeBERTa).
  AttentionImpl(const config::ModelConfig& config, std::shared_ptr<PositionEncodingImpl> position, int64_t layer = 0);

  // x: [B, S, H] -> context projected by output.dense: [B, S, H] (before dropout/residual).
  // With rows_from > 0 only the query rows [rows_from, S) are attended (every key still
  // visible to them): [B, S - rows_from, H], the last rows of the whole pass (a last layer whose
  // earlier rows nothing reads; their mask rows, or for a family that forms its scores, its
  // explicit rows).
  torch::Tensor attend(const torch::Tensor& x, const AttentionContext& ctx, int64_t rows_from = 0);
  // Initialises what build_model's generic draw must not: QK-norm weights (1), SSMax's s.
  void reset_parameters();

  SelfAttentionProj self{nullptr};
  DenseNorm output{nullptr};
  HeadNorm q_norm{nullptr}, k_norm{nullptr};  // model.qk_norm only
  torch::nn::Linear output_gate{nullptr};     // model.output_gate only: W_g [H, H], no bias
  HeadNorm output_norm{nullptr};              // model.output_norm only
  // model.kv_shift only: W [kv_heads, H] per shift, no bias.
  torch::nn::Linear key_shift{nullptr}, value_shift{nullptr};
  torch::Tensor ssmax_scale;  // attention_scale ssmax only: s per head [heads]
  // FAVOR+ only: the random projection [D, D] and the training forwards seen (for redraws);
  // buffers, so checkpoints carry them and a resumed run draws what it would have drawn.
  torch::Tensor favor_projection, favor_forwards;

 private:
  // q, k, v: [B, H, S, D] -> [B, H, S, D] by linear attention.
  torch::Tensor attend_linear(const torch::Tensor& q, const torch::Tensor& k, torch::Tensor& v,
                              const AttentionContext& ctx);
  void maybe_redraw_features();
  // The pass's facts for the plan (attention_plan.h): from x [B, S, H] before the projection.
  AttentionPassFacts pass_facts(const torch::Tensor& x, const AttentionContext& ctx) const;
  // plan_attention of this pass, logged at debug level when the layer's path changes.
  AttentionPlan plan(const torch::Tensor& x, const AttentionContext& ctx);
  // q, k, v: [B, H, S, D] -> [B, H, S, D] through SDPA with the encoder's mask (whole or per
  // block of query rows) or its causal flag.
  torch::Tensor attend_sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const AttentionContext& ctx);
  // Query rows [begin, end) through SDPA with their rows of the encoder's mask, or of causality.
  torch::Tensor sdpa_rows(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          const AttentionContext& ctx, int64_t begin, int64_t end);
  // Query rows [from, S) alone, as their share of any path: sdpa_rows, or for a family that forms
  // its scores bias_rows_to_sdpa (`path` says so) or attend_rows_with_terms, in the blocks the
  // whole pass would use; x: the layer's input.
  torch::Tensor attend_rows_from(const torch::Tensor& x, const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, const AttentionContext& ctx, AttentionPath path, int64_t from);
  // The family's tile term for this pass (a term of kind none where only stick-breaking forms
  // the scores); nullopt where the family has none for it.
  std::optional<ops::TileTerm> tile_term(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& ctx,
                                         const torch::Tensor& state);
  // The paths that form scores, q, k, v: [B, H, S, D] -> [B, H, S, D]; `state` is the family's
  // layer_state. attend_explicit: softmax(q.k * scale + term + mask) v + output term, in blocks
  // of query rows (stick-breaking replaces the softmax). attend_short_with_term: the short kernel
  // with the term's tables (training included). attend_in_tiles: ops::tile_attention (no S x S
  // tensor); with autograd, a softmax term with a backward in tiles is differentiated there
  // (ops::tile_attention_trainable), any other's gradient is recomputed per block of query rows
  // (recomputed_attention.h). The two fall back to attend_explicit where the family has no term
  // for the pass.
  torch::Tensor attend_explicit(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const AttentionContext& ctx, const torch::Tensor& state);
  torch::Tensor attend_short_with_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const AttentionContext& ctx, const torch::Tensor& state);
  torch::Tensor attend_in_tiles(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const AttentionContext& ctx, const torch::Tensor& state);
  // Packed documents (ctx.segments) in tiles: attend_in_tiles per document piece of each row.
  torch::Tensor attend_documents_in_tiles(const torch::Tensor& x, const torch::Tensor& q, const torch::Tensor& k,
                                          const torch::Tensor& v, const AttentionContext& ctx);
  // forward(q, k, v, state) (the tile kernel) with autograd on: where q, k, v, the state or the
  // family's parameters take a gradient, it is recomputed per block of query rows through
  // attend_rows_with_terms (recomputed_attention.h); else forward runs without autograd.
  torch::Tensor tiles_with_recomputed_gradient(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                               const AttentionContext& ctx, const torch::Tensor& state,
                                               AttentionForward forward);
  // The keys [0, K) query rows [begin, end) are scored against: K = end for causal rows (no
  // later key is visible) when the family's hooks take a prefix of the keys, else all S.
  int64_t visible_keys(const AttentionContext& ctx, int64_t S, int64_t begin, int64_t end) const;
  // rows [B|1, H|1, end - begin, K] plus the encoder's mask rows, or the causal flag's -inf.
  torch::Tensor masked_rows(torch::Tensor rows, const AttentionContext& ctx, int64_t begin, int64_t end,
                            int64_t K) const;
  // Query rows [begin, end) through SDPA with the family's positions-only term in the mask.
  torch::Tensor bias_rows_to_sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const AttentionContext& ctx, const torch::Tensor& state, int64_t begin, int64_t end);
  // attend_explicit for query rows [begin, end): -> [B, H, end - begin, D].
  torch::Tensor attend_rows_with_terms(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const AttentionContext& ctx, const torch::Tensor& state, int64_t begin,
                                       int64_t end);
  // The weights of scores [B, H, C, S] (rows begin..): softmax or stick-breaking, fp32 at least;
  // with stick-breaking's remainder when it goes to the query's own value (else undefined).
  std::pair<torch::Tensor, torch::Tensor> normalise(const torch::Tensor& scores, int64_t begin) const;
  // Whether this pass folds the family's causal key bias into the keys (traits().causal_key_bias:
  // FoX's c_i - c_j less its row constant) instead of forming the scores: softmax, causal, in
  // training, not under the reference kernel, float32/64.
  bool folds_key_bias(const AttentionContext& ctx, const torch::Tensor& q) const;
  // That pass: the key bias as one more key feature (zeros to a multiple of 8, the queries a
  // constant there), then the kernels of a family without a term (short kernel or SDPA); rows
  // [rows_from, S) of it -> [B, H, S - rows_from, D].
  torch::Tensor attend_with_key_bias(const torch::Tensor& x, const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, const AttentionContext& ctx, int64_t rows_from);
  // x [B, S, H] -> the heads' attention output [B, H, S - rows_from, D], every path but the
  // final projection.
  torch::Tensor attend_heads(const torch::Tensor& x, const AttentionContext& ctx, int64_t rows_from);
  // Whether this layer forms its scores itself: the family's terms, or stick-breaking.
  bool forms_scores() const;
  int64_t heads_, kv_heads_, head_dim_, layer_;
  AttentionPath last_path_ = AttentionPath::sdpa;  // the path last logged
  double dropout_;
  config::AttentionKind kind_;
  config::AttentionKernel kernel_;
  config::LinearAttentionConfig linear_;
  config::AttentionNormalizer normalizer_;
  config::StickBreakingRemainder remainder_;
  double ssmax_init_;
  double norm_offset_;         // model.norm_weight_offset (the head norms' weights start at 1 - it)
  double query_factor_ = 1.0;  // sqrt(head_dim / score_scale_dim): the scores' scale set by model.score_scale_dim
  uint64_t favor_seed_ = 0;
  std::shared_ptr<PositionEncodingImpl> position_;  // shared with the model; not registered here
};
TORCH_MODULE(Attention);

}  // namespace roformer::model
