// PaTH's accumulated Householder transforms (see path.h).
#include "roformer/model/position/path.h"

#include <ATen/ops/linear.h>
#include <torch/torch.h>

#include <algorithm>
#include <vector>

namespace roformer::model {
namespace {

constexpr double kL2NormEps = 1e-6;  // flash-linear-attention's l2_norm

// x [B, H, S, ...] padded with zeros along the tokens to `length`.
torch::Tensor pad_tokens(const torch::Tensor& x, int64_t length) {
  if (x.size(2) == length) return x;
  std::vector<int64_t> shape = x.sizes().vec();
  shape[2] = length - x.size(2);
  return torch::cat({x, torch::zeros(shape, x.options())}, 2);
}

// rows - beta (rows . w) w where `take` (per row, 0 or 1) holds: rows [.., R, D] times H = I - beta w w^T.
torch::Tensor reflect_rows(const torch::Tensor& rows, const torch::Tensor& w, const torch::Tensor& beta,
                           const torch::Tensor& take) {
  const torch::Tensor amount = (rows * w.unsqueeze(-2)).sum(-1) * beta.unsqueeze(-1) * take;  // [.., R]
  return rows - amount.unsqueeze(-1) * w.unsqueeze(-2);
}

}  // namespace

PathLayerImpl::PathLayerImpl(const config::PathConfig& c, int64_t hidden, int64_t heads) {
  w_proj = register_module("w_proj", torch::nn::ModuleList());
  w_proj->push_back(torch::nn::Linear(torch::nn::LinearOptions(hidden, c.rank).bias(false)));
  w_proj->push_back(torch::nn::Linear(torch::nn::LinearOptions(c.rank, hidden).bias(false)));
  if (c.short_conv)
    w_conv1d = register_module(
        "w_conv1d", torch::nn::Conv1d(torch::nn::Conv1dOptions(hidden, hidden, 3).groups(hidden).bias(false)));
  bt_proj = register_module("bt_proj", torch::nn::Linear(hidden, heads));
  if (c.forget_gate) g_proj = register_module("g_proj", torch::nn::Linear(hidden, heads));
}

PathKeyBlocks path_key_blocks(const torch::Tensor& k, const PathTransforms& t, int64_t block) {
  const int64_t B = k.size(0), H = k.size(1), S = k.size(2), D = k.size(3);
  PathKeyBlocks kb;
  kb.length = S;
  kb.block = std::min(block, S);
  const int64_t b = kb.block, n = kb.blocks = (S + b - 1) / b;
  const auto opts = k.options();
  kb.keys = pad_tokens(k, n * b).view({B, H, n, b, D});
  kb.w = pad_tokens(t.w, n * b).view({B, H, n, b, D});
  kb.beta = pad_tokens(t.beta.unsqueeze(-1), n * b).view({B, H, n, b});  // padding: H = I
  const torch::Tensor local = torch::arange(b, opts.dtype(torch::kLong));
  kb.carried = kb.keys;
  kb.product = torch::eye(D, opts).expand({B, H, n, D, D});
  for (int64_t s = 0; s < b; ++s) {
    const torch::Tensor w = kb.w.select(3, s), beta = kb.beta.select(3, s);  // [B, H, n, D], [B, H, n]
    if (s > 0) kb.carried = reflect_rows(kb.carried, w, beta, (local < s).to(opts.dtype()));
    kb.product = kb.product - (beta.unsqueeze(-1) * w).unsqueeze(-1) * at::matmul(w.unsqueeze(-2), kb.product);
  }
  return kb;
}

torch::Tensor path_scores(const torch::Tensor& q, const PathKeyBlocks& kb, int64_t begin, int64_t end) {
  const int64_t B = q.size(0), H = q.size(1), S = kb.length, D = q.size(3), b = kb.block, n = kb.blocks;
  const int64_t first = begin / b, last = (end + b - 1) / b, nq = last - first;  // query blocks [first, last)
  const auto opts = q.options();
  const torch::Tensor local = torch::arange(b, opts.dtype(torch::kLong));
  // The query blocks' own keys, by a sweep from the block's last key back: before key j the rows
  // i > j hold q_i H_i ... H_{j+1}; afterwards every row holds q_i H_i ... H_s.
  torch::Tensor P =
      pad_tokens(q.narrow(2, first * b, std::min(S, last * b) - first * b), nq * b).view({B, H, nq, b, D});
  const torch::Tensor Wq = kb.w.narrow(2, first, nq), Bq = kb.beta.narrow(2, first, nq),
                      Kq = kb.keys.narrow(2, first, nq);
  std::vector<torch::Tensor> own(b);
  for (int64_t j = b - 1; j >= 0; --j) {
    own[j] = (P * Kq.select(3, j).unsqueeze(3)).sum(-1);  // [B, H, nq, b rows]
    P = reflect_rows(P, Wq.select(3, j), Bq.select(3, j), (local >= j).to(opts.dtype()));
  }
  const torch::Tensor causal = torch::ones({b, b}, opts).tril();
  std::vector<torch::Tensor> by_distance{torch::stack(own, -1) * causal};  // distance 0: [B, H, nq, b, b]
  // Earlier blocks, nearest first: P . carried keys, then P absorbs that block's product. Index 0
  // of the padded arrays (identity, zero keys) serves query blocks with no block that far back.
  const torch::Tensor products = torch::cat({torch::eye(D, opts).expand({B, H, 1, D, D}), kb.product}, 2);
  const torch::Tensor keys = torch::cat({torch::zeros({B, H, 1, b, D}, opts), kb.carried}, 2);
  const torch::Tensor query_blocks = torch::arange(first, last, opts.dtype(torch::kLong));
  for (int64_t d = 1; d < last; ++d) {
    const torch::Tensor source = (query_blocks - d + 1).clamp_min(0);
    by_distance.push_back(at::matmul(P, keys.index_select(2, source).transpose(-1, -2)));
    P = at::matmul(P, products.index_select(2, source));
  }
  by_distance.push_back(torch::zeros_like(by_distance.front()));  // key blocks after the query's
  const torch::Tensor stacked = torch::stack(by_distance, 4);     // [B, H, nq, b, last + 1, b]
  const torch::Tensor distance = query_blocks.unsqueeze(1) - torch::arange(n, opts.dtype(torch::kLong)).unsqueeze(0);
  const torch::Tensor pick = torch::where(distance >= 0, distance, torch::full_like(distance, last));  // [nq, n]
  const torch::Tensor full = stacked.gather(4, pick.view({1, 1, nq, 1, n, 1}).expand({B, H, nq, b, n, b}));
  return full.reshape({B, H, nq * b, n * b}).narrow(2, begin - first * b, end - begin).narrow(3, 0, S);
}

torch::Tensor path_scores(const torch::Tensor& q, const torch::Tensor& k, const PathTransforms& t, int64_t begin,
                          int64_t end, int64_t block) {
  return path_scores(q, path_key_blocks(k, t, block), begin, end);
}

PathImpl::PathImpl(const config::PathConfig& config, int64_t num_layers, int64_t hidden, int64_t heads)
    : config_(config), heads_(heads) {
  traits_.forms_scores = true;
  traits_.keys_prefix = false;  // its key blocks cover the layer's S keys, built once per layer
  traits_.rotation = Rotation::none;
  traits_.term = ops::PathTerm::properties();
  layer = register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < num_layers; ++i) {
    layers_.emplace_back(config, hidden, heads);
    layer->push_back(layers_.back());
  }
}

namespace {

// The authors' causal short convolution of w's projection, [B, S, hidden]: output t sees inputs
// t-2 .. t. Over packed documents (segments [B, S]) an input of another document counts as the
// zero padding a document's first tokens see alone.
torch::Tensor short_convolution(const torch::Tensor& wx, const torch::Tensor& weight, const torch::Tensor& segments) {
  const int64_t S = wx.size(1), hidden = wx.size(2);
  if (!segments.defined())
    return torch::conv1d(wx.transpose(1, 2), weight, {}, 1, 2, 1, hidden).narrow(2, 0, S).transpose(1, 2);
  const torch::Tensor taps = weight.view({hidden, 3});  // tap 2 weighs input t, tap 0 input t-2
  torch::Tensor out = wx * taps.select(1, 2);
  for (int64_t lag = 1; lag <= 2 && lag < S; ++lag) {
    const torch::Tensor earlier = wx.narrow(1, 0, S - lag);  // input t - lag for t >= lag
    const torch::Tensor same = (segments.narrow(1, lag, S - lag) == segments.narrow(1, 0, S - lag)).unsqueeze(-1);
    const torch::Tensor term = (earlier * taps.select(1, 2 - lag)).masked_fill(same.logical_not(), 0.0);
    out = out + torch::cat({torch::zeros_like(wx.narrow(1, 0, lag)), term}, 1);
  }
  return out;
}

}  // namespace

torch::Tensor PathImpl::layer_state(const torch::Tensor& x, const torch::Tensor& /*k*/,
                                    const torch::Tensor& /*positions*/, int64_t layer_index,
                                    const torch::Tensor& segments) {
  const auto acc = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  PathLayer& l = layers_[layer_index];
  const int64_t B = x.size(0), S = x.size(1), hidden = x.size(2), D = hidden / heads_;
  torch::Tensor wx = at::linear(at::linear(x, l->w_proj[0]->as<torch::nn::Linear>()->weight),
                                l->w_proj[1]->as<torch::nn::Linear>()->weight);  // [B, S, hidden]
  if (l->w_conv1d) wx = torch::silu(short_convolution(wx, l->w_conv1d->weight, segments));
  torch::Tensor w = wx.to(acc).view({B, S, heads_, D}).transpose(1, 2);  // [B, H, S, D]
  w = w * torch::rsqrt((w * w).sum(-1, /*keepdim=*/true) + kL2NormEps);
  const torch::Tensor beta = 2.0 * torch::sigmoid(at::linear(x, l->bt_proj->weight, l->bt_proj->bias).to(acc));
  const torch::Tensor c =
      l->g_proj
          ? torch::log_sigmoid(at::linear(x, l->g_proj->weight, l->g_proj->bias).to(acc)).transpose(1, 2).cumsum(-1)
          : torch::zeros({B, heads_, S}, w.options());
  return torch::cat({w, beta.transpose(1, 2).unsqueeze(-1), c.unsqueeze(-1)}, -1);  // [B, H, S, D + 2]
}

torch::Tensor PathImpl::score_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& /*scores*/,
                                   const torch::Tensor& /*positions*/, int64_t layer, int64_t begin, int64_t end,
                                   const torch::Tensor& state) {
  const int64_t D = q.size(-1), C = end - begin;
  const auto acc = state.scalar_type();
  const torch::Tensor qa = q.to(acc), ka = k.to(acc);
  if (begin == 0 || layer != key_blocks_layer_ || key_blocks_.length != k.size(2)) {
    key_blocks_ = path_key_blocks(ka, {state.narrow(-1, 0, D), state.select(-1, D)}, config_.block);
    key_blocks_layer_ = layer;
  }
  torch::Tensor term = path_scores(qa, key_blocks_, begin, end) -
                       at::matmul(qa.narrow(2, begin, C), ka.transpose(-2, -1));  // what attention's q.k lacks
  if (end == k.size(2)) {  // the layer's last rows: let the key blocks (and their graph) go
    key_blocks_ = PathKeyBlocks{};
    key_blocks_layer_ = -1;
  }
  if (config_.forget_gate) {
    const torch::Tensor c = state.select(-1, D + 1);  // [B, H, S]
    term = term + (c.narrow(2, begin, C).unsqueeze(-1) - c.unsqueeze(2));
  }
  return term * score_scale(D);
}

std::optional<ops::TileTerm> PathImpl::tile_term(const torch::Tensor& /*q*/, const torch::Tensor& /*k*/,
                                                 const torch::Tensor& /*positions*/, int64_t /*layer*/,
                                                 const torch::Tensor& state, bool /*causal: PaTH is*/) {
  return ops::TileTerm{ops::PathTerm{state, config_.forget_gate}};  // state [B, H, S, D + 2]: w, beta, c
}

double PathImpl::score_term_bytes_per_pair(int64_t batch, int64_t heads, double /*elem*/) const {
  // PaTH's scores, their blocks stacked by distance and gathered, plain q.k and the term: fp32.
  return 5.0 * 4.0 * double(batch) * double(heads);
}

std::shared_ptr<PositionEncodingImpl> make_path_position(const config::ModelConfig& m) {
  return std::make_shared<PathImpl>(m.position.path, m.num_layers, m.hidden_size, m.num_heads);
}

}  // namespace roformer::model
