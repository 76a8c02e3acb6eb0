// CoPE's contextual positions (see cope.h).
#include "roformer/model/position/cope.h"

#include <torch/torch.h>

#include <cmath>
#include <memory>

#include "roformer/ops/cope_term/cope_table.h"
#include "roformer/ops/cope_term/cope_term.h"
#include "roformer/ops/short_attention/short_attention.h"

namespace roformer::model {

CopeLayerImpl::CopeLayerImpl(int64_t head_dim, int64_t max_positions) {
  pos_emb = register_parameter("pos_emb", torch::zeros({head_dim, max_positions}));
}

torch::Tensor cope_positions(const torch::Tensor& scores, int64_t max_positions) {
  const auto acc = scores.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const torch::Tensor gates = torch::sigmoid(scores.to(acc));  // masked keys (-1e30 or -inf): 0
  // sum_{t >= j} g_t = total - sum_{t < j} g_t, without flipping the tensor twice.
  const torch::Tensor counted = gates.sum(-1, /*keepdim=*/true) - gates.cumsum(-1) + gates;
  // Clamped below too: at a hidden key the sum cancels to zero up to rounding (-1e-16 would
  // index position -1).
  return counted.clamp(0.0, static_cast<double>(max_positions - 1));
}

CopeImpl::CopeImpl(const config::CopeConfig& config, int64_t num_layers, int64_t head_dim) : config_(config) {
  traits_.forms_scores = true;
  traits_.term = ops::CopeTerm::properties();
  TORCH_CHECK(config.max_positions >= 1, "CoPE: max_positions must be resolved (at least 1), got ",
              config.max_positions);
  layer = register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < num_layers; ++i) {
    layers_.emplace_back(head_dim, config.max_positions);
    layer->push_back(layers_.back());
  }
}

void CopeImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  for (CopeLayer& l : layers_) l->pos_emb.zero_();  // the authors' initialisation
}

torch::Tensor CopeImpl::score_term(const torch::Tensor& q, const torch::Tensor& /*k*/, const torch::Tensor& scores,
                                   const torch::Tensor& /*positions*/, int64_t layer_index, int64_t begin, int64_t end,
                                   const torch::Tensor& /*state*/) {
  const auto acc = scores.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const torch::Tensor rows = q.narrow(2, begin, end - begin).to(acc);
  const torch::Tensor at_integers = torch::matmul(rows, layers_[layer_index]->pos_emb.to(acc));  // [B, H, C, P]
  if (scores.is_cpu()) return ops::cope_term(scores, at_integers);  // one pass per row, no [B, H, C, S] temporaries
  const torch::Tensor pos = cope_positions(scores, config_.max_positions);  // [B, H, C, S]
  const torch::Tensor floor = pos.floor();
  const torch::Tensor w = pos - floor;                                       // the gradient reaches the gates through w
  const torch::Tensor low = at_integers.gather(-1, floor.to(torch::kLong));  // q . e[floor p]
  const torch::Tensor high = at_integers.gather(-1, pos.ceil().to(torch::kLong));  // q . e[ceil p]
  return high * w + low * (1 - w);
}

std::optional<ops::TileTerm> CopeImpl::tile_term(const torch::Tensor& q, const torch::Tensor& /*k*/,
                                                 const torch::Tensor& /*positions*/, int64_t layer_index,
                                                 const torch::Tensor& /*state*/, bool causal) {
  const auto acc = q.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const torch::Tensor rows = q.to(acc), table = layers_[layer_index]->pos_emb.to(acc);
  if (!causal) return ops::TileTerm{ops::CopeTerm{torch::matmul(rows, table)}};
  // The rows' gate totals, written by the tile forward (NaN until then), bound the table gradient's
  // products; causal rows read only the entries their counts reach (a row's count <= its index + 1).
  auto totals = std::make_shared<torch::Tensor>(torch::full(q.sizes().slice(0, 3), NAN, q.options()));
  ops::CopeTerm term{ops::causal_table_products(rows, table, *totals)};
  term.totals = totals;
  return ops::TileTerm{term};
}

torch::Tensor CopeImpl::short_attention_with_term(const torch::Tensor& q, const torch::Tensor& k,
                                                  const torch::Tensor& v, const ops::TileTerm& term, double scale,
                                                  bool causal) {
  const torch::Tensor& at_integers = std::get<ops::CopeTerm>(term.added).at_integers;
  return ops::short_attention_cope(q, k, v, at_integers.to(q.scalar_type()), scale, causal);
}

double CopeImpl::score_term_bytes_per_pair(int64_t batch, int64_t heads, double /*elem*/) const {
  // Gates, their sums, the positions, floor, w, two int64 indices, two gathers, the result: ~12
  // fp32 tensors of the block's [B, H, C, S] at once.
  return 12.0 * 4.0 * double(batch) * double(heads);
}

std::shared_ptr<PositionEncodingImpl> make_cope_position(const config::ModelConfig& m) {
  return std::make_shared<CopeImpl>(m.position.cope, m.num_layers, m.head_dim());
}

}  // namespace roformer::model
