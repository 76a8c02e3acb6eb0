// CoPE (Golovneva et al. 2024, "Contextual Position Encoding: Learning to Count What's
// Important"; the authors' code in facebookresearch/RAM, projects/cope): positions counted by
// the content. For query i and key j <= i,
//   gates    g_ij = sigmoid(s_ij), s the scaled, masked scores q_i.k_j / sqrt(d) (hidden keys: 0),
//   position p_ij = sum_{t=j..i} g_it, clamped to max_positions - 1,
//   term     z_ij = q_i . e[p_ij], e [head_dim, max_positions] per layer (shared by the heads,
//            zero-initialised), interpolated linearly between floor(p_ij) and ceil(p_ij),
// and z is added to the scores before the softmax, as the authors' code adds it to the logits.
// Causal attention only (config validation refuses MLM and linear attention). The term reads
// the scores, so attention forms them itself, per block of query rows at long lengths.
#pragma once

#include <torch/nn/modules/container/modulelist.h>

#include <vector>

#include "roformer/model/position/position_encoding.h"

namespace roformer::model {

// One layer's position table.
class CopeLayerImpl : public torch::nn::Module {
 public:
  CopeLayerImpl(int64_t head_dim, int64_t max_positions);
  torch::Tensor pos_emb;  // e: [head_dim, max_positions]
};
TORCH_MODULE(CopeLayer);

// The contextual positions of scores [.., C, S]: sum over keys t >= j of sigmoid(score), clamped
// to max_positions - 1 (the scores' dtype; fp32 at least).
torch::Tensor cope_positions(const torch::Tensor& scores, int64_t max_positions);

class CopeImpl : public PositionEncodingImpl {
 public:
  CopeImpl(const config::CopeConfig& config, int64_t num_layers, int64_t head_dim);
  torch::Tensor score_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& scores,
                           const torch::Tensor& positions, int64_t layer, int64_t begin, int64_t end,
                           const torch::Tensor& /*state*/) override;
  // The queries' products with the layer's position table, [B, H, S, P].
  std::optional<ops::TileTerm> tile_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& positions,
                                         int64_t layer, const torch::Tensor& state, bool causal) override;
  // ops::short_attention_cope with tile_term's products.
  torch::Tensor short_attention_with_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                          const ops::TileTerm& term, double scale, bool causal) override;
  double score_term_bytes_per_pair(int64_t batch, int64_t heads, double elem) const override;
  void reset_parameters() override;

  torch::nn::ModuleList layer{nullptr};  // CopeLayer per encoder layer

 private:
  config::CopeConfig config_;
  std::vector<CopeLayer> layers_;  // the modules in `layer`
};

}  // namespace roformer::model
