// RoPE (Su et al. 2021): rotates each head's query and key (and optionally value) features by
// angles proportional to the token position, so q_m . k_n depends only on n - m.
#pragma once

#include "roformer/model/position/position_encoding.h"

namespace roformer::model {

class RopeImpl : public PositionEncodingImpl {
 public:
  RopeImpl(const config::RopeConfig& config, int64_t head_dim);

  void rotate(torch::Tensor& q, torch::Tensor& k, torch::Tensor& v, const torch::Tensor& positions) override;
  std::string family() const override { return "rope"; }

  const config::RopeConfig& config() const { return config_; }

 private:
  config::RopeConfig config_;
  int64_t rotary_dim_;
};

}  // namespace roformer::model
