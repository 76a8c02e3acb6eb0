// RoPE's remapped relative positions: ReRoPE, Leaky ReRoPE, STRING, Self-Extend (see rope_remap.h).
#include "roformer/model/position/rope_remap.h"

#include "roformer/model/position/rope.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "roformer/model/position/rope_reference.h"

namespace roformer::model {

RopeRemapImpl::RopeRemapImpl(const config::RopeConfig& config, int64_t head_dim, bool bidirectional)
    : config_(config),
      rotary_dim_(config.resolved_rotary_dim(head_dim)),
      bidirectional_(bidirectional),
      freqs_(config, rotary_dim_) {
  traits_.forms_scores = true;                // content_scores rotates per (query, key) distance;
  traits_.rotation = Rotation::none;          // attention rotates nothing
  traits_.term = ops::NoTerm::properties();   // scores from its own rotations, no term on top
  traits_.term->bidirectional = false;        // the kernel's rotations are causal
  traits_.term->tile_backward = false;        // nor do they have a backward in tiles
  traits_.term->cuda_stick_breaking = false;  // nor do CUDA tiles take them under stick-breaking
  traits_.reads_pass_length = config_.mode == config::RopeMode::string ||
                              config_.scaling.kind == config::RopeScalingKind::dynamic_ntk ||
                              config_.scaling.kind == config::RopeScalingKind::longrope;
}

torch::Tensor RopeRemapImpl::rotated(const torch::Tensor& x, const torch::Tensor& at, int64_t length) {
  return rope_reference(x, at, freqs_.at(length), config_.pairing, rotary_dim_);
}

RopeRemapImpl::FarRotation RopeRemapImpl::far_rotation(const torch::Tensor& row_pos, const torch::Tensor& pos,
                                                       double side, int64_t S) const {
  switch (config_.mode) {
    case config::RopeMode::string: {
      // d - S + W = (i - (S - W)) - j: the query moved back by S - W, the keys in place.
      const double shift = std::floor(config_.string.shift_fraction * double(S)), local = double(config_.string.local);
      if (local >= shift) return {std::numeric_limits<double>::infinity(), {}, {}};
      return {shift, row_pos - side * (shift - local), pos};
    }
    case config::RopeMode::self_extend: {
      const double group = double(config_.self_extend.group), window = double(config_.self_extend.window);
      const double offset = window - std::floor(window / group);
      return {window, torch::floor(row_pos / group) + side * offset, torch::floor(pos / group)};
    }
    default: {  // rerope: the query at i/k + w - w/k, keys at j/k (ReRoPE, k = infinity: the query at w, keys at 0)
      const double w = double(config_.rerope.window), leak = config_.rerope.leak;
      if (leak > 0) return {w, row_pos / leak + side * w * (1.0 - 1.0 / leak), pos / leak};
      return {w, torch::full_like(row_pos, side * w), torch::zeros_like(pos)};  // keys at 0: their magnitude
    }
  }
}

double RopeRemapImpl::dual_chunk_tokens() const {
  return double(config_.dual_chunk.chunk_size) - double(config_.dual_chunk.local_window);
}

torch::Tensor RopeRemapImpl::layer_state(const torch::Tensor& /*x*/, const torch::Tensor& k,
                                         const torch::Tensor& positions, int64_t /*layer*/,
                                         const torch::Tensor& /*segments*/) {
  const int64_t S = k.size(2);
  const torch::Tensor pos = positions.to(torch::kFloat64);
  if (config_.mode == config::RopeMode::dual_chunk)  // positions >= 0: fmod is mod
    return rotated(k, torch::fmod(pos, dual_chunk_tokens()), S).unsqueeze(0);
  const torch::Tensor near = rotated(k, pos, S);
  const FarRotation far = far_rotation(pos, pos, 1.0, S);  // the keys' remap is the same on both sides
  if (!std::isfinite(far.threshold)) return near.unsqueeze(0);
  return torch::stack({near, rotated(k, far.key_at, S)});
}

torch::Tensor RopeRemapImpl::content_scores(const torch::Tensor& q, const torch::Tensor& k,
                                            const torch::Tensor& positions, int64_t begin, int64_t end,
                                            const torch::Tensor& state) {
  const int64_t S = q.size(2), C = end - begin, K = k.size(2);
  const torch::Tensor rows = q.narrow(2, begin, C);
  const torch::Tensor all = positions.to(torch::kFloat64);
  const torch::Tensor row_pos = all.narrow(-1, begin, C);
  const torch::Tensor pos = all.narrow(-1, 0, K);  // the keys [0, K)
  // The keys rotated to `at`: layer_state's (rotated once per layer), else now.
  auto keys_at = [&](int64_t set, const torch::Tensor& at) {
    return state.defined() ? state.select(0, set).narrow(2, 0, K) : rotated(k, at, S);
  };
  double scale = score_scale(q.size(-1));
  if (config_.mode == config::RopeMode::string)
    scale *= config_.string.attention_factor * config_.string.attention_factor;
  if (config_.mode == config::RopeMode::dual_chunk)
    return dual_chunk_scores(rows, keys_at(0, torch::fmod(pos, dual_chunk_tokens())), row_pos, pos, S, scale);
  auto dot = [&](const torch::Tensor& a, const torch::Tensor& b) { return at::matmul(a, b.transpose(-2, -1)) * scale; };
  // Near the query: plain RoPE.
  torch::Tensor scores = dot(rotated(rows, row_pos, S), keys_at(0, pos));
  const torch::Tensor distance = (row_pos.unsqueeze(-1) - pos.unsqueeze(-2));  // i - j: [.., C, K]
  auto broadcast = [&](const torch::Tensor& mask) { return mask.dim() == 2 ? mask : mask.unsqueeze(1); };
  for (double side : {1.0, -1.0}) {
    if (side < 0 && !bidirectional_) break;
    const FarRotation far = far_rotation(row_pos, pos, side, S);
    if (!std::isfinite(far.threshold)) break;
    const torch::Tensor remapped = dot(rotated(rows, far.query_at, S), keys_at(1, far.key_at));
    scores = torch::where(broadcast(side * distance >= far.threshold), remapped, scores);
  }
  return scores;
}

std::optional<ops::TileTerm> RopeRemapImpl::tile_term(const torch::Tensor& q, const torch::Tensor& /*k*/,
                                                      const torch::Tensor& positions, int64_t /*layer*/,
                                                      const torch::Tensor& state, bool causal) {
  if (!causal || positions.dim() != 1 || !state.defined()) return std::nullopt;
  const int64_t S = q.size(2);
  const torch::Tensor pos = positions.to(torch::kFloat64);
  ops::TileTerm term;
  if (config_.mode == config::RopeMode::dual_chunk) {  // keys at j mod c; the query by the chunk gap
    const double c = dual_chunk_tokens(), chunk_size = double(config_.dual_chunk.chunk_size);
    const torch::Tensor in_chunk = torch::fmod(pos, c);
    term.q = rotated(q, in_chunk, S);
    term.k = state.select(0, 0);
    term.mid_q = rotated(q, (in_chunk + c).clamp_max(chunk_size), S);
    term.far_q = rotated(q, torch::full_like(pos, std::min(2.0 * c - 1.0, chunk_size)), S);
    term.far_k = term.k;
    term.chunk = static_cast<int64_t>(c);
    return term;
  }
  term.q = rotated(q, pos, S);
  term.k = state.select(0, 0);
  if (config_.mode == config::RopeMode::string)
    term.score_factor = config_.string.attention_factor * config_.string.attention_factor;
  const FarRotation far = far_rotation(pos, pos, 1.0, S);
  if (std::isfinite(far.threshold)) {
    term.far_q = rotated(q, far.query_at, S);
    term.far_k = state.select(0, 1);
    term.far_threshold = far.threshold;
  }
  return term;
}

torch::Tensor RopeRemapImpl::dual_chunk_scores(const torch::Tensor& rows, const torch::Tensor& keys,
                                               const torch::Tensor& row_pos, const torch::Tensor& pos, int64_t S,
                                               double scale) {
  const double chunk_size = double(config_.dual_chunk.chunk_size);
  const double c = dual_chunk_tokens();
  auto dot = [&](const torch::Tensor& a, const torch::Tensor& b) { return at::matmul(a, b.transpose(-2, -1)) * scale; };
  const torch::Tensor query_in_chunk = torch::fmod(row_pos, c);
  torch::Tensor scores = dot(rotated(rows, query_in_chunk, S), keys);  // intra-chunk: i mod c - j mod c
  const torch::Tensor gap =
      torch::floor(row_pos / c).unsqueeze(-1) - torch::floor(pos / c).unsqueeze(-2);  // [.., C, K]
  if ((gap < 1).all().item<bool>()) return scores;                                    // one chunk: plain RoPE
  auto broadcast = [&](const torch::Tensor& mask) { return mask.dim() == 2 ? mask : mask.unsqueeze(1); };
  const torch::Tensor successive = dot(rotated(rows, (query_in_chunk + c).clamp_max(chunk_size), S), keys);
  scores = torch::where(broadcast(gap == 1), successive, scores);
  const torch::Tensor inter_at = torch::full_like(row_pos, std::min(2.0 * c - 1.0, chunk_size));
  return torch::where(broadcast(gap >= 2), dot(rotated(rows, inter_at, S), keys), scores);
}

double RopeRemapImpl::score_term_bytes_per_pair(int64_t batch, int64_t heads, double elem) const {
  // The near and far scores (and the far-future ones) beside the result, and the distance.
  const bool three = bidirectional_ || config_.mode == config::RopeMode::dual_chunk;  // DCA: three query rotations
  return double(batch) * double(heads) * elem * (three ? 3.0 : 2.0) + 8.0 * 2;
}

std::shared_ptr<PositionEncodingImpl> make_rope_position(const config::ModelConfig& m) {
  if (m.position.rope.mode != config::RopeMode::rotate)
    return std::make_shared<RopeRemapImpl>(m.position.rope, m.head_dim(), m.objective == config::Objective::mlm);
  return std::make_shared<RopeImpl>(m.position.rope, m.head_dim());
}

}  // namespace roformer::model
