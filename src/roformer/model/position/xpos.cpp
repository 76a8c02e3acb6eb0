// xPos (see xpos.h): the RoPE module's rotation followed by the per-pair exponential scale.
#include "roformer/model/position/xpos.h"

#include <torch/torch.h>

namespace roformer::model {

torch::Tensor xpos_scale(const torch::Tensor& positions, const config::XposConfig& config, config::RopePairing pairing,
                         int64_t rotary_dim, int64_t head_dim) {
  const auto f64 = torch::dtype(torch::kFloat64).device(positions.device());
  const torch::Tensor i = torch::arange(rotary_dim / 2, f64);
  const torch::Tensor zeta = (2.0 * i / static_cast<double>(rotary_dim) + config.gamma) / (1.0 + config.gamma);
  // Pair i's two features: (2i, 2i+1) interleaved, (i, i + rotary_dim/2) half-split.
  const torch::Tensor per_feature = pairing == config::RopePairing::interleaved
                                        ? zeta.repeat_interleave(2)
                                        : torch::cat({zeta, zeta});                         // [rotary_dim]
  const torch::Tensor p = positions.to(torch::kFloat64).unsqueeze(-1) / config.scale_base;  // [.., S, 1]
  torch::Tensor scale = torch::pow(per_feature, p);                                         // [.., S, rotary_dim]
  if (rotary_dim < head_dim) {
    std::vector<int64_t> tail(scale.sizes().begin(), scale.sizes().end());
    tail.back() = head_dim - rotary_dim;
    scale = torch::cat({scale, torch::ones(tail, f64)}, -1);
  }
  return scale;
}

XposImpl::XposImpl(const config::RopeConfig& rope, const config::XposConfig& xpos, int64_t head_dim)
    : RopeImpl(rope, head_dim), xpos_(xpos), head_dim_(head_dim) {
  traits_.rotation = Rotation::applied;  // the decay is applied in rotate(); the fused kernel has none
}

void XposImpl::rotate(torch::Tensor& q, torch::Tensor& k, torch::Tensor& v, const torch::Tensor& positions) {
  RopeImpl::rotate(q, k, v, positions);
  const int64_t rotary_dim = config().resolved_rotary_dim(head_dim_);
  // [2, .., S, D]: the query scale and its reciprocal for the keys, formed in double and cast
  // once to q's dtype (cached per length for shared positions, so a layer pays two multiplies).
  auto build = [&] {
    const torch::Tensor centred = positions - positions.size(-1) / 2;
    const torch::Tensor s = xpos_scale(centred, xpos_, config().pairing, rotary_dim, head_dim_);
    return torch::stack({s, s.reciprocal()}).to(q.scalar_type());
  };
  const torch::Tensor scales = positions.dim() == 2
                                   ? build().unsqueeze(2)  // [2, B, 1, S, D]
                                   : scale_.get(positions.device(), positions.size(0), q.scalar_type(), build);
  q = q * scales[0];
  k = k * scales[1];
}

std::shared_ptr<PositionEncodingImpl> make_xpos_position(const config::ModelConfig& m) {
  return std::make_shared<XposImpl>(m.position.rope, m.position.xpos, m.head_dim());
}

}  // namespace roformer::model
