// ReRoPE and Leaky ReRoPE (Su 2023, "Rectified Rotary Position Embeddings", kexue.fm/archives/9708;
// code bojone/rerope): RoPE whose relative position i - j is kept inside a window w and capped
// past it, so a model never sees a relative position it was not trained on:
//   ReRoPE:       rel(i, j) = min(i - j, w)
//   Leaky ReRoPE: rel(i, j) = i - j below w, w + (i - j - w) / k past it (k = rope.rerope.leak)
// and, with bidirectional attention, the same on the other side (rel = -w, or -w - (j - i - w)/k).
// As in Su's code the scores are formed from several rotations of the same q and k: the plain
// RoPE score inside the window; past it the query rotated to (i/k + w - w/k) against keys
// rotated to j/k (ReRoPE: the query at w against unrotated keys). So attention rotates nothing
// (Traits: forms_scores, Rotation::none) and content_scores forms the scores per block of query
// rows (memory grows with S); about two (causal) or three (bidirectional) score matrices where
// RoPE forms one. The frequencies are the checkpoint's RoPE frequencies with any scaling, so
// ReRoPE applies to any RoPE checkpoint (model.position.rope.mode=rerope).
#pragma once

#include "roformer/model/position/position_encoding.h"
#include "roformer/model/position/rope_frequencies.h"

namespace roformer::model {

class ReRopeImpl : public PositionEncodingImpl {
 public:
  ReRopeImpl(const config::RopeConfig& config, int64_t head_dim, bool bidirectional);

  torch::Tensor content_scores(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& positions,
                               int64_t begin, int64_t end) override;
  double score_term_bytes_per_pair(int64_t batch, int64_t heads, double elem) const override;

 private:
  // q or k [B, H, S|C, D] rotated to positions `at` ([S|C] or [B, S|C], any real values).
  torch::Tensor rotated(const torch::Tensor& x, const torch::Tensor& at, int64_t length);

  config::RopeConfig config_;
  int64_t rotary_dim_;
  bool bidirectional_;
  double window_, leak_;
  RopeFrequencyCache freqs_;
};

}  // namespace roformer::model
