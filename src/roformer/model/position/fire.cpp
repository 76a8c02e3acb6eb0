// FIRE's functional relative bias (see fire.h).
#include "roformer/model/position/fire.h"

#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/torch.h>

#include "roformer/common/autocast.h"
#include "roformer/ops/fire_bias/fire_bias.h"
#include "roformer/ops/piecewise_linear/piecewise_linear.h"

#include <limits>
#include <vector>

namespace roformer::model {
namespace {

// psi(x) = log(|c x| + 1)
torch::Tensor psi(const torch::Tensor& x, const torch::Tensor& c) {
  return torch::log1p((c * x).abs());
}

}  // namespace

FireMlpImpl::FireMlpImpl(int64_t width, int64_t num_heads) {
  hidden = register_module("hidden", torch::nn::Linear(1, width));
  out = register_module("out", torch::nn::Linear(width, num_heads));
}

torch::Tensor FireMlpImpl::forward(const torch::Tensor& x) {
  const auto dt = x.scalar_type();
  const torch::Tensor h = torch::relu(at::linear(x.unsqueeze(-1), hidden->weight.to(dt), hidden->bias.to(dt)));
  return at::linear(h, out->weight.to(dt), out->bias.to(dt));
}

FireMlpImpl::Piecewise FireMlpImpl::piecewise(torch::ScalarType dt) {
  // In `dt` under autocast too (the CPU kernels take float32 or float64 tables).
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(autocast_keys());
  const torch::Tensor w = hidden->weight.to(dt).squeeze(1), b = hidden->bias.to(dt);  // [W]
  const torch::Tensor w2 = out->weight.to(dt), b2 = out->bias.to(dt);                 // [H, W], [H]
  const int64_t W = w.size(0);
  torch::Tensor kinks, active;  // sorted kinks [W]; active [W + 1, W]
  {
    torch::NoGradGuard no_grad;
    // Unit u switches at -b_u / w_u; a unit with w_u = 0 never switches (its kink sits at +inf).
    const torch::Tensor flat = w == 0;
    const torch::Tensor kink = torch::where(flat, std::numeric_limits<double>::infinity(), -b / w.masked_fill(flat, 1));
    const auto [sorted, order] = torch::sort(kink);
    kinks = sorted;
    const torch::Tensor rank = torch::argsort(order).unsqueeze(0);               // [1, W]
    const torch::Tensor s = torch::arange(W + 1, order.options()).unsqueeze(1);  // [W + 1, 1]
    // In segment s (x above the s lowest kinks, at or below the rest) unit u is on when x has
    // passed its kink and it rises, or not yet and it falls; a flat unit when its bias is positive.
    active = ((w > 0) & (rank < s)) | ((w < 0) & (rank >= s)) | (flat & (b > 0));
  }
  const torch::Tensor on = active.to(dt);
  return {kinks, torch::matmul(w2 * w, on.t()), torch::matmul(w2 * b, on.t()) + b2.unsqueeze(1)};
}

torch::Tensor FireMlpImpl::by_head(const torch::Tensor& x) {
  const Piecewise f = piecewise(x.scalar_type());
  if (x.is_cpu()) return ops::piecewise_linear(x, f.kinks, f.slope, f.intercept);  // one pass, no index tensors
  torch::Tensor segment;
  {
    torch::NoGradGuard no_grad;
    segment = torch::searchsorted(f.kinks, x.detach().contiguous()).reshape(-1);  // kinks below x
  }
  std::vector<int64_t> shape{f.slope.size(0)};
  for (int64_t d : x.sizes()) shape.push_back(d);
  return f.slope.index_select(1, segment).view(shape) * x.unsqueeze(0) +
         f.intercept.index_select(1, segment).view(shape);
}

FireFunctionImpl::FireFunctionImpl(const config::FireConfig& config, int64_t num_heads, bool bidirectional) {
  c = register_parameter("c", torch::tensor(config.init_c, torch::kFloat));
  L_multiplier = register_parameter("L_multiplier", torch::tensor(1.0, torch::kFloat));
  past = register_module("past", FireMlp(config.mlp_width, num_heads));
  if (bidirectional) future = register_module("future", FireMlp(config.mlp_width, num_heads));
}

torch::Tensor last_in_document(const torch::Tensor& positions) {
  const int64_t S = positions.size(-1);
  const auto opts = torch::dtype(torch::kLong).device(positions.device());
  // A document's last token: the row's last, or one whose successor's position does not grow.
  const torch::Tensor ends = torch::cat({positions.narrow(-1, 1, S - 1) <= positions.narrow(-1, 0, S - 1),
                                         torch::ones_like(positions.narrow(-1, 0, 1), opts.dtype(torch::kBool))},
                                        -1);
  const torch::Tensor index = torch::where(ends, torch::arange(S, opts).expand_as(positions), S);
  const torch::Tensor next_end = std::get<0>(torch::cummin(index.flip(-1), -1)).flip(-1);  // first end at or after t
  return positions.gather(-1, next_end);
}

std::pair<torch::Tensor, torch::Tensor> fire_inputs(const torch::Tensor& positions, const torch::Tensor& c,
                                                    const torch::Tensor& threshold, int64_t begin, int64_t end,
                                                    bool bidirectional, int64_t keys) {
  const torch::Tensor pos = positions.to(c.scalar_type());
  const torch::Tensor query = pos.narrow(-1, begin, end - begin).unsqueeze(-1);  // [.., C, 1]
  const torch::Tensor key = keys < 0 ? pos : pos.narrow(-1, 0, keys);
  const torch::Tensor distance = psi(query - key.unsqueeze(-2), c);  // [.., C, K]
  const torch::Tensor past = distance / (psi(torch::maximum(query, threshold), c) + FireImpl::kEps);
  if (!bidirectional) return {past, {}};
  const torch::Tensor last = last_in_document(positions).to(c.scalar_type()).narrow(-1, begin, end - begin);
  const torch::Tensor future =
      distance / (psi(torch::maximum(last.unsqueeze(-1) - query, threshold), c) + FireImpl::kEps);
  return {past, future};
}

FireImpl::FireImpl(const config::FireConfig& config, int64_t num_layers, int64_t num_heads, bool bidirectional)
    : config_(config), num_heads_(num_heads), bidirectional_(bidirectional) {
  traits_.forms_scores = true;
  traits_.term = ops::FireTerm::properties();
  layer = register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < (config.shared_layers ? 1 : num_layers); ++i) {
    functions_.emplace_back(config, num_heads, bidirectional);
    layer->push_back(functions_.back());
  }
}

void FireImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  for (FireFunction& f : functions_) {
    f->c.fill_(config_.init_c);
    f->L_multiplier.fill_(1.0);
    for (FireMlp mlp : {f->past, f->future}) {
      if (!mlp) continue;
      mlp->hidden->reset_parameters();  // PyTorch's Linear initialisation, as the authors' code
      mlp->out->reset_parameters();
    }
  }
}

torch::Tensor FireImpl::layer_state(const torch::Tensor& x, const torch::Tensor& /*k*/,
                                    const torch::Tensor& /*positions*/, int64_t layer_index,
                                    const torch::Tensor& segments) {
  const int64_t S = x.size(1);
  if (!segments.defined() || bidirectional_ || double(S) * double(S) * double(num_heads_) * 4.0 > kTableBytes)
    return {};
  FireFunction& f = functions_[config_.shared_layers ? 0 : layer_index];
  const auto dt = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const torch::Tensor c = f->c.to(dt);
  const torch::Tensor threshold = (f->L_multiplier.to(dt) * static_cast<double>(config_.l_init)).abs();
  const torch::Tensor grid = torch::arange(S, torch::dtype(torch::kLong).device(x.device()));
  return f->past->forward(fire_inputs(grid, c, threshold, 0, S, false).first);  // [S, S, H]
}

torch::Tensor FireImpl::score_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& /*scores*/,
                                   const torch::Tensor& positions, int64_t layer_index, int64_t begin, int64_t end,
                                   const torch::Tensor& state) {
  const int64_t K = k.size(2);  // keys [0, K)
  if (state.defined()) {        // packed documents: each pair's bias from the table of positions in [0, S)
    const int64_t B = positions.size(0), C = end - begin, S = positions.size(1), H = state.size(-1);
    const torch::Tensor index =
        positions.narrow(1, begin, C).unsqueeze(2) * S + positions.narrow(1, 0, K).unsqueeze(1);  // [B, C, K]
    return state.view({S * S, H}).index_select(0, index.reshape(-1)).view({B, C, K, H}).permute({0, 3, 1, 2});
  }
  FireFunction& f = functions_[config_.shared_layers ? 0 : layer_index];
  const auto dt = q.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const torch::Tensor c = f->c.to(dt);
  const torch::Tensor threshold = (f->L_multiplier.to(dt) * static_cast<double>(config_.l_init)).abs();
  // Evaluation only: activation checkpointing's forward runs without autograd in training and
  // must round as its recomputation with autograd does.
  if (!bidirectional_ && positions.dim() == 1 && positions.scalar_type() == torch::kLong && q.is_cpu() &&
      !torch::GradMode::is_enabled() && !is_training()) {
    const FireMlpImpl::Piecewise mlp = f->past->piecewise(dt);  // one pass per row, no [.., C, K] temporaries
    return ops::fire_bias({positions, begin, end, K, c.item<double>(), threshold.item<double>(), kEps, mlp.kinks,
                           mlp.slope, mlp.intercept})
        .unsqueeze(0);
  }
  const auto [past_x, future_x] = fire_inputs(positions, c, threshold, begin, end, bidirectional_, K);
  torch::Tensor bias = f->past->by_head(past_x);  // [H, .., C, K]
  if (bidirectional_) {
    const torch::Tensor key_after_query = positions.narrow(-1, 0, K).unsqueeze(-2) >
                                          positions.narrow(-1, begin, end - begin).unsqueeze(-1);  // [.., C, K]
    bias = torch::where(key_after_query, f->future->by_head(future_x), bias);
  }
  // [H, C, K] -> [1, H, C, K], or [H, B, C, K] -> [B, H, C, K]
  return positions.dim() == 1 ? bias.unsqueeze(0) : bias.permute({1, 0, 2, 3});
}

std::optional<ops::TileTerm> FireImpl::tile_term(const torch::Tensor& q, const torch::Tensor& /*k*/,
                                                 const torch::Tensor& positions, int64_t layer_index,
                                                 const torch::Tensor& state, bool causal) {
  if (bidirectional_ == causal || positions.dim() != 1 || state.defined()) return std::nullopt;
  FireFunction& f = functions_[config_.shared_layers ? 0 : layer_index];
  const auto dt = q.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const FireMlpImpl::Piecewise mlp = f->past->piecewise(dt);
  ops::FireTerm fire;
  fire.c_tensor = f->c.to(dt);  // with their graphs in training: the backward in tiles returns their gradients
  fire.threshold_tensor = (f->L_multiplier.to(dt) * static_cast<double>(config_.l_init)).abs();
  fire.c = fire.c_tensor.item<double>();
  fire.threshold = fire.threshold_tensor.item<double>();
  fire.eps = kEps;
  fire.kinks = mlp.kinks;
  fire.slope = mlp.slope;
  fire.intercept = mlp.intercept;
  if (bidirectional_) {  // keys after the query: the second MLP, normalised by the last position
    const FireMlpImpl::Piecewise after = f->future->piecewise(dt);
    fire.future_kinks = after.kinks;
    fire.future_slope = after.slope;
    fire.future_intercept = after.intercept;
  }
  return ops::TileTerm{fire};
}

double FireImpl::score_term_bytes_per_pair(int64_t /*batch*/, int64_t heads, double /*elem*/) const {
  // Per pair, shared by the batch: the distance and the input (2), the segment index (an int64:
  // 2), the gathered slopes and intercepts, their product and the sum (4 x heads); per side, in fp32.
  const double per_side = 4.0 + 4.0 * double(heads);
  return 4.0 * per_side * (bidirectional_ ? 2.0 : 1.0);
}

std::shared_ptr<PositionEncodingImpl> make_fire_position(const config::ModelConfig& m) {
  return std::make_shared<FireImpl>(m.position.fire, m.num_layers, m.num_heads, m.objective == config::Objective::mlm);
}

}  // namespace roformer::model
