// FoX, the Forgetting Transformer (Lin, Nikishin, He, Courville, ICLR 2025; the authors' code in
// zhixuan-lin/forgetting-transformer): no positions, a data-dependent decay instead. Per layer
// and head a forget gate from the layer's input x,
//   f_t = sigmoid(w . x_t + b)   (gate data; gate bias_only: f = sigmoid(b), one per head),
//   c   = cumsum_t log f_t,
// and the scores of query i and key j gain D_ij = c_i - c_j = sum_{l=j+1..i} log f_l (causal).
// With a constant gate D_ij = (i - j) log f: ALiBi with a learned slope. Bidirectional
// attention (MLM) has no published form; ours is D_ij = -|c_i - c_j|, the gates between the two
// tokens in either direction. fox.rope also rotates q and k with RoPE (the authors' use_rope).
// The term needs the layer's input, so it comes through layer_state; attention forms the scores.
#pragma once

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <vector>

#include "roformer/model/position/position_encoding.h"
#include "roformer/model/position/rope.h"

namespace roformer::model {

// One layer's forget gate: fgate_proj (Linear hidden -> heads, with bias) for gate data, or
// fgate_bias [heads] alone for gate bias_only (the authors' names).
class FoxLayerImpl : public torch::nn::Module {
 public:
  FoxLayerImpl(config::FoxGate gate, int64_t hidden, int64_t heads);
  // x [B, S, hidden] -> the gates' logits [B, S, heads].
  torch::Tensor gate_logits(const torch::Tensor& x) const;
  torch::nn::Linear fgate_proj{nullptr};
  torch::Tensor fgate_bias;
};
TORCH_MODULE(FoxLayer);

class FoxImpl : public PositionEncodingImpl {
 public:
  FoxImpl(const config::PositionConfig& config, int64_t num_layers, int64_t hidden, int64_t heads, bool bidirectional);
  void rotate(torch::Tensor& q, torch::Tensor& k, torch::Tensor& v, const torch::Tensor& positions) override;
  // c = cumsum(log f) along the sequence: [B, heads, S] in fp32 (fp64 for a double model).
  torch::Tensor layer_state(const torch::Tensor& x, const torch::Tensor& k, const torch::Tensor& positions,
                            int64_t layer, const torch::Tensor& segments) override;
  // D for query rows [begin, end): [B, heads, C, S] from state c.
  torch::Tensor score_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& scores,
                           const torch::Tensor& positions, int64_t layer, int64_t begin, int64_t end,
                           const torch::Tensor& state) override;
  // Causal FoX: the gates' running sums (layer_state).
  std::optional<ops::TileTerm> tile_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& positions,
                                         int64_t layer, const torch::Tensor& state, bool causal) override;
  double score_term_bytes_per_pair(int64_t batch, int64_t heads, double elem) const override;
  // Causal: -c_j (the term c_i - c_j less its row constant).
  torch::Tensor key_bias(const torch::Tensor& state) const override { return -state; }
  // fox.decay_time_min/max: the bias-only gates' biases from their decay times (fgate_bias_init).
  void reset_parameters() override;

  torch::nn::ModuleList layer{nullptr};  // FoxLayer per encoder layer

 private:
  bool bidirectional_;
  double decay_time_min_, decay_time_max_;
  std::vector<FoxLayer> layers_;    // the modules in `layer`
  std::shared_ptr<RopeImpl> rope_;  // fox.rope only; RoPE holds no parameters
};

}  // namespace roformer::model
