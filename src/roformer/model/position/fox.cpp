// FoX's forget-gate decay (see fox.h).
#include "roformer/model/position/fox.h"

#include <ATen/ops/linear.h>
#include <torch/torch.h>

#include <cmath>

namespace roformer::model {

FoxLayerImpl::FoxLayerImpl(config::FoxGate gate, int64_t hidden, int64_t heads) {
  if (gate == config::FoxGate::data)
    fgate_proj = register_module("fgate_proj", torch::nn::Linear(hidden, heads));
  else
    fgate_bias = register_parameter("fgate_bias", torch::zeros({heads}));
}

torch::Tensor FoxLayerImpl::gate_logits(const torch::Tensor& x) const {
  if (fgate_proj) return at::linear(x, fgate_proj->weight, fgate_proj->bias);
  return fgate_bias.to(x.scalar_type()).expand({x.size(0), x.size(1), fgate_bias.size(0)});
}

FoxImpl::FoxImpl(const config::PositionConfig& config, int64_t num_layers, int64_t hidden, int64_t heads,
                 bool bidirectional)
    : bidirectional_(bidirectional),
      decay_time_min_(config.fox.decay_time_min),
      decay_time_max_(config.fox.decay_time_max) {
  traits_.forms_scores = true;
  traits_.term = ops::FoxTerm::properties();
  traits_.causal_key_bias = !bidirectional;
  traits_.rotation = config.fox.rope ? Rotation::applied : Rotation::none;
  if (config.fox.rope) rope_ = std::make_shared<RopeImpl>(config.rope, hidden / heads);
  layer = register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < num_layers; ++i) {
    layers_.emplace_back(config.fox.gate, hidden, heads);
    layer->push_back(layers_.back());
  }
}

void FoxImpl::reset_parameters() {
  if (decay_time_min_ <= 0) return;
  torch::NoGradGuard no_grad;
  for (const FoxLayer& l : layers_) {
    const int64_t heads = l->fgate_bias.size(0);
    const torch::Tensor T =
        torch::exp(torch::linspace(std::log(decay_time_min_), std::log(decay_time_max_), heads, torch::kFloat64));
    l->fgate_bias.copy_(-torch::log(torch::expm1(1.0 / T)));  // sigmoid(b) = exp(-1 / T)
  }
}

void FoxImpl::rotate(torch::Tensor& q, torch::Tensor& k, torch::Tensor& v, const torch::Tensor& positions) {
  if (rope_) rope_->rotate(q, k, v, positions);
}

torch::Tensor FoxImpl::layer_state(const torch::Tensor& x, const torch::Tensor& /*k*/,
                                   const torch::Tensor& /*positions*/, int64_t layer_index,
                                   const torch::Tensor& /*segments*/) {
  // The gates' logs and their running sum in fp32 at least, as the authors' kernel takes them.
  const auto acc = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const torch::Tensor log_f = torch::log_sigmoid(layers_[layer_index]->gate_logits(x).to(acc));  // [B, S, heads]
  return log_f.transpose(1, 2).cumsum(-1);                                                       // c: [B, heads, S]
}

torch::Tensor FoxImpl::score_term(const torch::Tensor& /*q*/, const torch::Tensor& /*k*/, const torch::Tensor& scores,
                                  const torch::Tensor& /*positions*/, int64_t /*layer*/, int64_t begin, int64_t end,
                                  const torch::Tensor& state) {
  const torch::Tensor keys = state.narrow(2, 0, scores.size(-1));                                 // c_j, j < K
  const torch::Tensor d = state.narrow(2, begin, end - begin).unsqueeze(-1) - keys.unsqueeze(2);  // c_i - c_j
  return bidirectional_ ? -d.abs() : d;  // causal: keys after the query are hidden by the mask
}

std::optional<ops::TileTerm> FoxImpl::tile_term(const torch::Tensor& /*q*/, const torch::Tensor& /*k*/,
                                                const torch::Tensor& /*positions*/, int64_t /*layer*/,
                                                const torch::Tensor& state, bool /*causal: the kernel's launch*/) {
  return ops::TileTerm{ops::FoxTerm{state}};  // the running sums [B, heads, S]
}

double FoxImpl::score_term_bytes_per_pair(int64_t batch, int64_t heads, double /*elem*/) const {
  // The difference (and its abs), the scores plus it, and the softmax weights: fp32 each.
  return (bidirectional_ ? 4.0 : 3.0) * 4.0 * double(batch) * double(heads);
}

std::shared_ptr<PositionEncodingImpl> make_fox_position(const config::ModelConfig& m) {
  return std::make_shared<FoxImpl>(m.position, m.num_layers, m.hidden_size, m.num_heads,
                                   m.objective == config::Objective::mlm);
}

}  // namespace roformer::model
