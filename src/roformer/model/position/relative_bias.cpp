// T5 bucketed relative bias and ALiBi (see relative_bias.h). Both return [H, 2S - 1]: the bias
// of every offset key - query from -(S - 1) to S - 1.
#include "roformer/model/position/relative_bias.h"

#include <torch/torch.h>

#include <cmath>

namespace roformer::model {
namespace {

// The offsets key - query of positions 0..S-1: -(S - 1) .. S - 1, int64 [2S - 1].
torch::Tensor offsets(int64_t S, const torch::Device& device) {
  return torch::arange(-(S - 1), S, torch::dtype(torch::kLong).device(device));
}

}  // namespace

torch::Tensor t5_relative_bucket(const torch::Tensor& relative, bool bidirectional, int64_t num_buckets,
                                 int64_t max_distance) {
  torch::Tensor bucket = torch::zeros_like(relative);
  torch::Tensor n;
  int64_t nb = num_buckets;
  if (bidirectional) {
    nb /= 2;
    bucket = bucket + (relative > 0).to(torch::kLong) * nb;  // keys after the query use the upper half
    n = relative.abs();
  } else {
    n = (-relative).clamp_min(0);  // only the past (key before query) is distinguished
  }
  const int64_t max_exact = nb / 2;
  const torch::Tensor is_small = n < max_exact;
  // Logarithmic buckets from max_exact up to max_distance, then all share the last one.
  const torch::Tensor nf = n.to(torch::kFloat64).clamp_min(1.0);
  torch::Tensor large =
      max_exact + (torch::log(nf / max_exact) / std::log(static_cast<double>(max_distance) / max_exact) *
                   static_cast<double>(nb - max_exact))
                      .to(torch::kLong);
  large = large.clamp_max(nb - 1);
  return bucket + torch::where(is_small, n, large);
}

T5BiasImpl::T5BiasImpl(const config::T5BiasConfig& config, int64_t num_heads, bool bidirectional)
    : config_(config), bidirectional_(bidirectional) {
  relative_attention_bias =
      register_module("relative_attention_bias", torch::nn::Embedding(config.num_buckets, num_heads));
}

torch::Tensor T5BiasImpl::relative_bias(int64_t S, const torch::Device& device) {
  const torch::Tensor& buckets = buckets_.get(device, S, torch::kLong, [&] {
    return t5_relative_bucket(offsets(S, device), bidirectional_, config_.num_buckets, config_.max_distance);
  });
  return relative_attention_bias->forward(buckets).t();  // [2S - 1, H] -> [H, 2S - 1]
}

std::vector<double> alibi_slopes(int64_t num_heads) {
  auto power_of_two_slopes = [](int64_t n) {
    std::vector<double> s(n);
    const double start = std::pow(2.0, -8.0 / static_cast<double>(n));
    for (int64_t i = 0; i < n; ++i) s[i] = std::pow(start, static_cast<double>(i + 1));
    return s;
  };
  int64_t closest = 1;
  while (closest * 2 <= num_heads) closest *= 2;
  std::vector<double> slopes = power_of_two_slopes(closest);
  if (closest < num_heads) {
    const std::vector<double> extra = power_of_two_slopes(2 * closest);
    for (int64_t i = 0; static_cast<int64_t>(slopes.size()) < num_heads; i += 2) slopes.push_back(extra[i]);
  }
  return slopes;
}

AlibiImpl::AlibiImpl(int64_t num_heads) : slopes_(alibi_slopes(num_heads)) {}

torch::Tensor AlibiImpl::relative_bias(int64_t S, const torch::Device& device) {
  // Symmetric distances serve both directions: with causal attention the future is masked
  // anyway, so on the visible entries -m|i - j| equals ALiBi's -m(i - j).
  // Double here; the attention mask casts it to the dtype of the scores.
  return bias_.get(device, S, torch::kFloat64, [&] {
    const torch::Tensor dist = offsets(S, device).abs().to(torch::kFloat64);  // [2S - 1]
    const torch::Tensor slopes = torch::tensor(slopes_, torch::kFloat64).to(device);
    return -slopes.unsqueeze(1) * dist.unsqueeze(0);  // [H, 2S - 1]
  });
}

std::shared_ptr<PositionEncodingImpl> make_t5_bias_position(const config::ModelConfig& m) {
  return std::make_shared<T5BiasImpl>(m.position.t5_bias, m.num_heads, m.objective == config::Objective::mlm);
}

std::shared_ptr<PositionEncodingImpl> make_alibi_position(const config::ModelConfig& m) {
  return std::make_shared<AlibiImpl>(m.num_heads);
}

}  // namespace roformer::model
