// The position-encoding seam: every family is one module with three hooks, and attention and
// the encoder never branch on the family.
//   embed:      absolute families add to the token embeddings      x: [B, S, E]
//   rotate:     RoPE rotates queries/keys (and optionally values)  q, k, v: [B, H, S, D]
//   score_bias: additive per-head bias on attention scores         -> [1 or B, H, Sq, Sk]
// positions: int64, [S] = 0..S-1 shared by the batch (what the encoder passes, so tables for
// it can be cached per length), or explicit [B, S].
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

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

  // Relative families return an additive score bias; others an undefined tensor.
  virtual torch::Tensor score_bias(const torch::Tensor& positions) { return {}; }

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
