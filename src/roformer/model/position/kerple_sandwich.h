// Chi et al.'s offset biases after ALiBi, each returned as one [H, 2S - 1] row per head (the
// bias of every offset key - query; attention_mask.h builds the score rows from it, so both
// keep the fast SDPA path and memory that grows with S):
//   kerple   (Chi et al., NeurIPS 2022): learned per-head r1, r2 > 0, shared by the layers;
//            log: -r1 log(1 + r2 |i - j|), power: -r1 |i - j|^r2. As in the authors' released
//            code, both start uniform (the log variant r1 ~ U(0, 2), r2 ~ U(0, 1); the power
//            variant r1 ~ U(0, 1), exponent r2 ~ U(0, 2)) and are clamped in place to >= 0.01
//            before every use, the power exponent also to <= 2.
//   sandwich (Chi et al., ACL 2023): parameter-free, the sinusoidal inner product shifted to 0 at
//            offset 0 and scaled per head like ALiBi's slopes:
//            b_h(d) = [sum_{k=1..d'/2} cos(d / 10000^(2k/d')) - d'/2] / (8 h / H), h = 1..H.
// Both depend on |i - j| only: with causal attention the future is masked anyway.
#pragma once

#include "roformer/model/position/position_encoding.h"
#include "roformer/model/position/table_cache.h"

namespace roformer::model {

class KerpleImpl : public PositionEncodingImpl {
 public:
  KerpleImpl(const config::KerpleConfig& config, int64_t num_heads);
  torch::Tensor relative_bias(int64_t S, const torch::Device& device) override;
  void reset_parameters() override;

  static constexpr double kMinParameter = 0.01;  // the authors' eps
  static constexpr double kMaxExponent = 2.0;    // the power variant's exponent ceiling

  torch::Tensor r1;  // [H] the scale
  torch::Tensor r2;  // [H] log: the distance factor inside the log; power: the exponent

 private:
  // The authors' projection: r1, r2 clamped in place (no gradient) to their allowed ranges.
  void clamp_parameters();

  config::KerpleConfig config_;
  TableCache distance_;  // |offset| as float64 [2S - 1]
};

class SandwichImpl : public PositionEncodingImpl {
 public:
  SandwichImpl(int64_t dim, int64_t num_heads);  // dim: d', even
  torch::Tensor relative_bias(int64_t S, const torch::Device& device) override;

 private:
  int64_t dim_, num_heads_;
  TableCache bias_;  // float64 [H, 2S - 1]
};

// Sandwich's bias for the offsets `offsets` (any integer tensor): [H, offsets...] in float64.
torch::Tensor sandwich_bias(const torch::Tensor& offsets, int64_t dim, int64_t num_heads);

}  // namespace roformer::model
