// ReRoPE's windowed scores (see rerope.h).
#include "roformer/model/position/rerope.h"

#include <torch/torch.h>

#include "roformer/model/position/rope_reference.h"

namespace roformer::model {

ReRopeImpl::ReRopeImpl(const config::RopeConfig& config, int64_t head_dim, bool bidirectional)
    : config_(config),
      rotary_dim_(config.resolved_rotary_dim(head_dim)),
      bidirectional_(bidirectional),
      window_(static_cast<double>(config.rerope.window)),
      leak_(config.rerope.leak),
      freqs_(config, rotary_dim_) {
  traits_.forms_scores = true;        // content_scores rotates per (query, key) distance;
  traits_.rotation = Rotation::none;  // attention rotates nothing
}

torch::Tensor ReRopeImpl::rotated(const torch::Tensor& x, const torch::Tensor& at, int64_t length) {
  return rope_reference(x, at, freqs_.at(length), config_.pairing, rotary_dim_);
}

torch::Tensor ReRopeImpl::content_scores(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& positions,
                                         int64_t begin, int64_t end) {
  const int64_t S = q.size(2), C = end - begin;
  const torch::Tensor rows = q.narrow(2, begin, C);
  const torch::Tensor pos = positions.to(torch::kFloat64);
  const torch::Tensor row_pos = pos.narrow(-1, begin, C);
  const double scale = score_scale(q.size(-1));
  auto dot = [&](const torch::Tensor& a, const torch::Tensor& b) { return at::matmul(a, b.transpose(-2, -1)) * scale; };
  // Inside the window: plain RoPE.
  const torch::Tensor near = dot(rotated(rows, row_pos, S), rotated(k, pos, S));
  // Past it: the query at i/k + w - w/k, keys at j/k (ReRoPE, k = infinity: the query at w, keys at 0).
  const bool leaky = leak_ > 0;
  const torch::Tensor keys = rotated(k, leaky ? pos / leak_ : torch::zeros_like(pos), S);  // at 0: the magnitude
  auto far = [&](double side) {  // side +1: keys before the query; -1: after it
    const torch::Tensor at =
        leaky ? row_pos / leak_ + side * window_ * (1.0 - 1.0 / leak_) : torch::full_like(row_pos, side * window_);
    return dot(rotated(rows, at, S), keys);
  };
  const torch::Tensor distance = (row_pos.unsqueeze(-1) - pos.unsqueeze(-2));  // i - j: [.., C, S]
  auto broadcast = [&](const torch::Tensor& mask) { return mask.dim() == 2 ? mask : mask.unsqueeze(1); };
  torch::Tensor scores = torch::where(broadcast(distance >= window_), far(1.0), near);
  if (bidirectional_) scores = torch::where(broadcast(distance <= -window_), far(-1.0), scores);
  return scores;
}

double ReRopeImpl::score_term_bytes_per_pair(int64_t batch, int64_t heads, double elem) const {
  // The near and far scores (and the far-future ones) beside the result, and the distance.
  return double(batch) * double(heads) * elem * (bidirectional_ ? 3.0 : 2.0) + 8.0 * 2;
}

}  // namespace roformer::model
