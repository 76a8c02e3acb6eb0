// RoPE (Su et al. 2021): rotates each head's query and key (and optionally value) features by
// angles proportional to the token position, so q_m . k_n depends only on n - m.
#pragma once

#include "roformer/model/position/position_encoding.h"
#include "roformer/model/position/rope_frequencies.h"
#include "roformer/model/position/table_cache.h"

namespace roformer::model {

class RopeImpl : public PositionEncodingImpl {
 public:
  RopeImpl(const config::RopeConfig& config, int64_t head_dim);

  void rotate(torch::Tensor& q, torch::Tensor& k, torch::Tensor& v, const torch::Tensor& positions) override;

  const config::RopeConfig& config() const { return config_; }

 protected:
  // Tables for the fused kernel RoPE (model.position.rope.impl), rotating q and k over the whole
  // head, at positions [S] shared by the batch, on the CPU; not fusable otherwise.
  bool tables_apply(const torch::Tensor& positions, int64_t head_dim) const override;
  FusedRotation rotation_tables(const torch::Tensor& positions, int64_t head_dim, torch::ScalarType dtype) override;

 private:
  config::RopeConfig config_;
  int64_t rotary_dim_;
  RopeFrequencyCache freqs_;
  TableCache inv_freq_;      // float64 [rotary_dim / 2] on the inputs' device, per length (dynamic NTK)
  TableCache cos_sin_;       // float32 [length, rotary_dim] (ops::rope_table) on the inputs' device
  TableCache fused_tables_;  // [2, length, head_dim] (rotation_tables) on the CPU, per dtype
};

}  // namespace roformer::model
