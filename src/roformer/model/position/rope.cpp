// RoPE module: computes the (possibly scaled) frequencies for this forward pass and applies the
// rotation to q, k and, with rotate_value, v.
#include "roformer/model/position/rope.h"

#include "roformer/model/position/rope_reference.h"

namespace roformer::model {

RopeImpl::RopeImpl(const config::RopeConfig& config, int64_t head_dim)
    : config_(config), rotary_dim_(config.rotary_dim > 0 ? config.rotary_dim : head_dim) {}

void RopeImpl::rotate(torch::Tensor& q, torch::Tensor& k, torch::Tensor& v, const torch::Tensor& positions) {
  // Dynamic NTK sizes its factor by the length of this pass (positions start at 0 here).
  const RopeFrequencies freqs = rope_frequencies(config_, rotary_dim_, positions.size(-1));
  q = rope_reference(q, positions, freqs, config_.pairing, rotary_dim_);
  k = rope_reference(k, positions, freqs, config_.pairing, rotary_dim_);
  if (config_.rotate_value) {
    RopeFrequencies value_freqs = freqs;
    value_freqs.magnitude = 1.0;  // YaRN's temperature is for the logits, not the values
    v = rope_reference(v, positions, value_freqs, config_.pairing, rotary_dim_);
  }
}

}  // namespace roformer::model
