// RoPE with a remapped relative position, the training-free context extensions that keep a
// model inside the relative positions it was trained on. For query i and key j, d = i - j:
//   ReRoPE       (Su 2023, kexue.fm/archives/9708; bojone/rerope): d below the window w, w past it;
//   Leaky ReRoPE (the same):  d below w, w + (d - w) / k past it (k = rope.rerope.leak);
//   STRING       (An et al., ICLR 2025; HKUNLP/STRING): d below S, d - S + W from S on
//                (S = floor(string.shift_fraction x the pass's length), W = string.local; a pass
//                with W >= S is plain RoPE), with RoPE's cos and sin times string.attention_factor;
//   Self-Extend  (Jin et al., ICML 2024; datamllab/LongLM): d below the window W, past it the
//                grouped positions floor(i/G) + W - floor(W/G) of the query and floor(j/G) of the key.
//   DCA          (An et al., ICML 2024; HKUNLP/ChunkLlama): chunks of c = chunk_size - local_window;
//                keys at j mod c, the query at i mod c for its own chunk, at min(i mod c + c,
//                chunk_size) for the previous chunk and at min(2c - 1, chunk_size) before that (causal).
// With bidirectional attention the same on the other side, mirrored (ReRoPE's -w; for STRING and
// Self-Extend our own mirror). As in the authors' code the scores are formed from two rotations
// of the same q and k: plain RoPE near the query, and past the threshold the query and keys
// rotated to the remapped positions. So attention rotates nothing (Traits: forms_scores,
// Rotation::none) and content_scores forms the scores per block of query rows from keys rotated
// once per layer (layer_state); about two (causal) or three (bidirectional) score matrices where
// RoPE forms one. The frequencies are the
// checkpoint's RoPE frequencies with any scaling, so each applies to any RoPE checkpoint
// (model.position.rope.mode).
#pragma once

#include "roformer/model/position/position_encoding.h"
#include "roformer/model/position/rope_frequencies.h"

namespace roformer::model {

class RopeRemapImpl : public PositionEncodingImpl {
 public:
  RopeRemapImpl(const config::RopeConfig& config, int64_t head_dim, bool bidirectional);

  torch::Tensor content_scores(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& positions,
                               int64_t begin, int64_t end, const torch::Tensor& state) override;
  // The layer's keys rotated once for every block of query rows: [2, B, H, S, D] (near, far),
  // [1, ...] when nothing is remapped or for DCA (its keys at j mod c).
  torch::Tensor layer_state(const torch::Tensor& x, const torch::Tensor& k, const torch::Tensor& positions,
                            int64_t layer, const torch::Tensor& segments) override;
  // Causal ReRoPE, STRING and Self-Extend: q rotated near and far, the layer state's keys and the
  // threshold; DCA: q rotated for the chunk gaps 0, 1 and beyond, and the chunk.
  std::optional<ops::TileTerm> tile_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& positions,
                                         int64_t layer, const torch::Tensor& state, bool causal) override;
  double score_term_bytes_per_pair(int64_t batch, int64_t heads, double elem) const override;

 private:
  // Past `threshold` on `side` (+1: keys before the query, -1: after it) the query rows rotate to
  // query_at and the keys to key_at; threshold infinite: nothing is remapped.
  struct FarRotation {
    double threshold;
    torch::Tensor query_at, key_at;
  };
  FarRotation far_rotation(const torch::Tensor& row_pos, const torch::Tensor& pos, double side, int64_t S) const;
  // DCA's scores of query rows at positions row_pos [C] against keys at pos [S] (scaled by `scale`).
  torch::Tensor dual_chunk_scores(const torch::Tensor& rows, const torch::Tensor& keys, const torch::Tensor& row_pos,
                                  const torch::Tensor& pos, int64_t S, double scale);
  // DCA's tokens per chunk, c = chunk_size - local_window.
  double dual_chunk_tokens() const;
  // q or k [B, H, S|C, D] rotated to positions `at` ([S|C] or [B, S|C], any real values).
  torch::Tensor rotated(const torch::Tensor& x, const torch::Tensor& at, int64_t length);

  config::RopeConfig config_;
  int64_t rotary_dim_;
  bool bidirectional_;
  RopeFrequencyCache freqs_;
};

}  // namespace roformer::model
