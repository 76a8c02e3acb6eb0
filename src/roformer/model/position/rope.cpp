// RoPE module: computes the (possibly scaled) frequencies for this forward pass and applies the
// rotation to q, k and, with rotate_value, v.
#include "roformer/model/position/rope.h"

#include "roformer/model/position/rope_reference.h"
#include "roformer/ops/rope/rope.h"
#include "roformer/ops/short_attention/short_attention.h"

namespace roformer::model {

RopeImpl::RopeImpl(const config::RopeConfig& config, int64_t head_dim)
    : config_(config), rotary_dim_(config.resolved_rotary_dim(head_dim)), freqs_(config, rotary_dim_) {
  traits_.rotation = Rotation::tables;
}

void RopeImpl::rotate(torch::Tensor& q, torch::Tensor& k, torch::Tensor& v, const torch::Tensor& positions) {
  // Dynamic NTK sizes its factor by the length of this pass (positions start at 0 here).
  const int64_t length = positions.size(-1);
  const RopeFrequencies& freqs = freqs_.at(length);  // host math once per length; device copies cached below
  if (config_.impl == config::RopeKernel::fused) {
    ops::RopeSpec spec;
    spec.inv_freq = inv_freq_.get(q.device(), length, torch::kFloat64, [&] {
      return torch::tensor(freqs.inv_freq, torch::kFloat64).to(q.device());  // once per (device, length)
    });
    spec.position_scale = freqs.position_scale;
    if (config_.cos_sin_table)
      spec.cos_sin = cos_sin_.get(q.device(), length, torch::kFloat32, [&] {
        return ops::rope_table(torch::tensor(freqs.inv_freq, torch::kFloat64), freqs.position_scale, length)
            .to(q.device());
      });
    spec.magnitude = freqs.magnitude;  // q and k only; the op never scales v
    spec.interleaved = config_.pairing == config::RopePairing::interleaved;
    spec.rotary_dim = rotary_dim_;
    spec.layout = ops::RopeLayout::bhsd;  // q/k/v are strided [B, H, S, D] views; no copies
    std::vector<torch::Tensor> out = ops::rope(
        config_.rotate_value ? std::vector<torch::Tensor>{q, k, v} : std::vector<torch::Tensor>{q, k}, positions, spec);
    q = out[0];
    k = out[1];
    if (config_.rotate_value) v = out[2];
    return;
  }
  q = rope_reference(q, positions, freqs, config_.pairing, rotary_dim_);
  k = rope_reference(k, positions, freqs, config_.pairing, rotary_dim_);
  if (config_.rotate_value) {
    RopeFrequencies value_freqs = freqs;
    value_freqs.magnitude = 1.0;  // YaRN's temperature is for the logits, not the values
    v = rope_reference(v, positions, value_freqs, config_.pairing, rotary_dim_);
  }
}

bool RopeImpl::tables_apply(const torch::Tensor& positions, int64_t head_dim) const {
  return config_.impl == config::RopeKernel::fused && !config_.rotate_value && rotary_dim_ == head_dim &&
         positions.dim() == 1 && positions.is_cpu();
}

PositionEncodingImpl::FusedRotation RopeImpl::rotation_tables(const torch::Tensor& positions, int64_t head_dim,
                                                              torch::ScalarType dtype) {
  const int64_t length = positions.size(0);
  const RopeFrequencies& freqs = freqs_.at(length);
  const bool interleaved = config_.pairing == config::RopePairing::interleaved;
  auto build = [&] {
    return ops::short_attention_rotation(torch::tensor(freqs.inv_freq, torch::kFloat64), freqs.position_scale,
                                         freqs.magnitude, interleaved, positions, dtype);
  };
  // Cached per (length, dtype) for the encoder's positions 0..S-1; other ids (an input's own
  // positions) are built for the call.
  const torch::Tensor ids = positions.to(torch::kLong).contiguous();
  const int64_t* id = ids.data_ptr<int64_t>();
  bool counting = true;
  for (int64_t s = 0; s < length && counting; ++s) counting = id[s] == s;
  return {true, counting ? fused_tables_.get(positions.device(), length, dtype, build) : build(), interleaved};
}

}  // namespace roformer::model
