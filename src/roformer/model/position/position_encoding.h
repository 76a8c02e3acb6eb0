// The position-encoding seam: every family is one module with these hooks, and attention and
// the encoder never branch on the family.
//   embed:       absolute families add to the token embeddings      x: [B, S, E]
//   rotate:      RoPE/xPos rotate queries/keys (optionally values)   q, k, v: [B, H, S, D]
//   relative_bias: additive per-head score bias by key - query offset -> [H, 2S - 1]
//   score_term:  a term computed from q and k, per layer and query rows (Shaw, Transformer-XL, DeBERTa)
//   output_term: a term from the attention weights (Shaw's relative values)
// Families with score terms make attention form the scores itself; the others keep SDPA.
// positions: int64, [S] = 0..S-1 shared by the batch (what the encoder passes, so tables for
// it can be cached per length), or explicit [B, S].
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <cmath>
#include <memory>
#include <string>

#include "roformer/config/config.h"

namespace roformer::model {

class PositionEncodingImpl : public torch::nn::Module {
 public:
  ~PositionEncodingImpl() override = default;

  // Absolute families add their encoding to x; others return x unchanged.
  virtual torch::Tensor embed(const torch::Tensor& x, const torch::Tensor& positions) { return x; }

  // Rotary families rotate q and k (and v when configured) in place of the inputs.
  virtual void rotate(torch::Tensor& q, torch::Tensor& k, torch::Tensor& v, const torch::Tensor& positions) {}

  // Bias families (T5, ALiBi) return their additive score bias for positions 0..S-1 as one row
  // per head, [H, 2S - 1], column S - 1 + d holding the bias for key - query = d (a bias of the
  // offset alone; attention_mask.h turns it into query rows); others an undefined tensor.
  virtual torch::Tensor relative_bias(int64_t S, const torch::Device& device) { return {}; }

  // Content-position score term for layer `layer` and query rows [begin, end), added to the
  // scaled scores q.k * score_scale: q, k [B, H, S, D] (after rotate) -> [B, H, end - begin, S].
  // Attention asks for all rows at once, or for blocks of them at long lengths. Only called
  // when has_score_terms().
  virtual bool has_score_terms() const { return false; }
  virtual torch::Tensor score_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& positions,
                                   int64_t layer, int64_t begin, int64_t end) {
    return {};
  }
  // Term added to the attention output of query rows [begin, begin + C) from their weights
  // p [B, H, C, S] -> [B, H, C, D], or undefined.
  virtual torch::Tensor output_term(const torch::Tensor& probs, const torch::Tensor& positions, int64_t layer,
                                    int64_t begin) {
    return {};
  }
  // The factor on q.k: 1/sqrt(D), or DeBERTa's 1/sqrt(3D) shared by its three terms.
  virtual double score_scale(int64_t head_dim) const { return 1.0 / std::sqrt(static_cast<double>(head_dim)); }

  // Longest sequence the family accepts (0: unbounded). Learned tables are the only limit.
  virtual int64_t max_length() const { return 0; }
};

// Builds the family selected by model.position.kind.
std::shared_ptr<PositionEncodingImpl> make_position_encoding(const config::ModelConfig& model);

// NoPE: no position information at all (causal masking alone carries order).
class NoPositionImpl : public PositionEncodingImpl {
 public:
};

}  // namespace roformer::model
