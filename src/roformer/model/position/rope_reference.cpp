// Reference RoPE rotation in plain LibTorch ops (see rope_reference.h).
#include "roformer/model/position/rope_reference.h"

#include <torch/torch.h>

namespace roformer::model {

torch::Tensor rope_reference(const torch::Tensor& x, const torch::Tensor& positions, const RopeFrequencies& freqs,
                             config::RopePairing pairing, int64_t rotary_dim) {
  TORCH_CHECK(x.dim() == 4, "rope_reference: x must be [B, H, S, D], got ", x.sizes());
  const int64_t head_dim = x.size(3);
  TORCH_CHECK(rotary_dim % 2 == 0 && rotary_dim <= head_dim && rotary_dim > 0, "rope_reference: rotary_dim ",
              rotary_dim, " must be even and in (0, ", head_dim, "]");
  TORCH_CHECK(static_cast<int64_t>(freqs.inv_freq.size()) == rotary_dim / 2, "rope_reference: expected ",
              rotary_dim / 2, " frequencies, got ", freqs.inv_freq.size());
  const int64_t half = rotary_dim / 2;
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(x.device());
  const torch::Tensor inv = torch::tensor(freqs.inv_freq, f64.device(torch::kCPU)).to(x.device());  // [R/2]
  const torch::Tensor pos = positions.to(f64) * freqs.position_scale;                               // [S] | [B,S]
  const torch::Tensor angle = pos.unsqueeze(-1) * inv;                                              // [.., S, R/2]
  torch::Tensor cos = (angle.cos() * freqs.magnitude).to(x.scalar_type());
  torch::Tensor sin = (angle.sin() * freqs.magnitude).to(x.scalar_type());
  if (positions.dim() == 2) {  // [B, S, R/2] -> [B, 1, S, R/2], broadcast over heads
    cos = cos.unsqueeze(1);
    sin = sin.unsqueeze(1);
  }
  const torch::Tensor rot = x.narrow(-1, 0, rotary_dim);
  torch::Tensor rotated;
  if (pairing == config::RopePairing::interleaved) {
    const torch::Tensor pairs = rot.unflatten(-1, {half, 2});  // [..., R/2, 2]
    const torch::Tensor x0 = pairs.select(-1, 0), x1 = pairs.select(-1, 1);
    rotated = torch::stack({x0 * cos - x1 * sin, x1 * cos + x0 * sin}, -1).flatten(-2);
  } else {
    const torch::Tensor x0 = rot.narrow(-1, 0, half), x1 = rot.narrow(-1, half, half);
    rotated = torch::cat({x0 * cos - x1 * sin, x1 * cos + x0 * sin}, -1);
  }
  if (rotary_dim == head_dim) return rotated;
  return torch::cat({rotated, x.narrow(-1, rotary_dim, head_dim - rotary_dim)}, -1);
}

}  // namespace roformer::model
