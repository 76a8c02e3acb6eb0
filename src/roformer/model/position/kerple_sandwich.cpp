// KERPLE and Sandwich offset biases (see kerple_sandwich.h).
#include "roformer/model/position/kerple_sandwich.h"

#include <torch/torch.h>

#include <cmath>
#include <vector>

namespace roformer::model {
namespace {

// |key - query| for positions 0..S-1, offsets -(S - 1) .. S - 1: float64 [2S - 1].
torch::Tensor absolute_offsets(int64_t S, const torch::Device& device) {
  return torch::arange(-(S - 1), S, torch::dtype(torch::kFloat64).device(device)).abs_();
}

}  // namespace

KerpleImpl::KerpleImpl(const config::KerpleConfig& config, int64_t num_heads) : config_(config) {
  r1 = register_parameter("r1", torch::ones({num_heads}));
  r2 = register_parameter("r2", torch::ones({num_heads}));
  reset_parameters();
}

void KerpleImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  const bool log = config_.variant == config::KerpleVariant::log;
  r1.uniform_(0.0, log ? 2.0 : 1.0);
  r2.uniform_(0.0, log ? 1.0 : 2.0);
  clamp_parameters();
}

void KerpleImpl::clamp_parameters() {
  torch::NoGradGuard no_grad;
  r1.clamp_min_(kMinParameter);
  if (config_.variant == config::KerpleVariant::power) {
    r2.clamp_(kMinParameter, kMaxExponent);
  } else {
    r2.clamp_min_(kMinParameter);
  }
}

torch::Tensor KerpleImpl::relative_bias(int64_t S, const torch::Device& device) {
  clamp_parameters();
  const torch::Tensor dist = distance_.get(device, S, torch::kFloat64, [&] { return absolute_offsets(S, device); })
                                 .to(r1.scalar_type())
                                 .unsqueeze(0);  // [1, 2S - 1]
  const torch::Tensor a = r1.unsqueeze(1), b = r2.unsqueeze(1);
  if (config_.variant == config::KerpleVariant::log) return -a * torch::log1p(b * dist);
  return -a * torch::pow(dist, b);  // pow's exponent gradient is 0 at distance 0 (no 0 * log 0)
}

torch::Tensor sandwich_bias(const torch::Tensor& offsets, int64_t dim, int64_t num_heads) {
  // One frequency at a time: memory stays that of the offsets (a [.., d'/2] outer product of
  // 32k-token offsets would not).
  const torch::Tensor d = offsets.to(torch::kFloat64);
  torch::Tensor inner = torch::full_like(d, -static_cast<double>(dim) / 2);  // the - d'/2 shift
  for (int64_t k = 1; k <= dim / 2; ++k)
    inner.add_(torch::cos(d * std::pow(10000.0, -2.0 * static_cast<double>(k) / static_cast<double>(dim))));
  const torch::Tensor h = torch::arange(1, num_heads + 1, torch::dtype(torch::kFloat64).device(offsets.device()));
  std::vector<int64_t> shape{num_heads};
  shape.insert(shape.end(), static_cast<size_t>(inner.dim()), 1);
  return inner.unsqueeze(0) / (h * (8.0 / static_cast<double>(num_heads))).view(shape);  // / (8h/H)
}

SandwichImpl::SandwichImpl(int64_t dim, int64_t num_heads) : dim_(dim), num_heads_(num_heads) {
  TORCH_CHECK(dim > 0 && dim % 2 == 0, "Sandwich: d' must be even and positive, got ", dim);
}

torch::Tensor SandwichImpl::relative_bias(int64_t S, const torch::Device& device) {
  return bias_.get(device, S, torch::kFloat64, [&] {
    const torch::Tensor offsets = torch::arange(-(S - 1), S, torch::dtype(torch::kLong).device(device));
    return sandwich_bias(offsets, dim_, num_heads_);
  });
}

std::shared_ptr<PositionEncodingImpl> make_kerple_position(const config::ModelConfig& m) {
  return std::make_shared<KerpleImpl>(m.position.kerple, m.num_heads);
}

std::shared_ptr<PositionEncodingImpl> make_sandwich_position(const config::ModelConfig& m) {
  return std::make_shared<SandwichImpl>(m.position.sandwich.resolved_dim(m.head_dim()), m.num_heads);
}

}  // namespace roformer::model
