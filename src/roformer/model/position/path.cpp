// PaTH's accumulated Householder transforms (see path.h).
#include "roformer/model/position/path.h"

#include "roformer/model/position/path_evaluation.h"
#include "roformer/model/position/path_sweep.h"
#include "roformer/ops/conv_silu_norm/conv_silu_norm.h"
#include "roformer/ops/tile_attention/path_blocks.h"

#include <ATen/ops/linalg_solve_triangular.h>
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

// x.narrow(dim, start, length), or x itself where that is all of it (a slice's backward forms a
// zero-filled gradient of all of x even then).
torch::Tensor part(const torch::Tensor& x, int64_t dim, int64_t start, int64_t length) {
  return start == 0 && length == x.size(dim) ? x : x.narrow(dim, start, length);
}

// The strictly lower triangle of x [.., b, b]: entry (s, t) for s > t.
torch::Tensor strictly_lower(const torch::Tensor& x) {
  return x.tril(-1);
}

// x [B, H, n, ...] -> [n, B * H, ...] contiguous: the blocks' layout, where a run of blocks is a
// contiguous slice and the products batch over blocks and heads without copies.
torch::Tensor block_major(const torch::Tensor& x) {
  std::vector<int64_t> order{2, 0, 1}, shape{x.size(2), x.size(0) * x.size(1)};
  for (int64_t d = 3; d < x.dim(); ++d) {
    order.push_back(d);
    shape.push_back(x.size(d));
  }
  return x.permute(order).reshape(shape);
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

PathKeyBlocks path_key_blocks(const torch::Tensor& k, const PathTransforms& t, int64_t block, int64_t multiple) {
  const int64_t B = k.size(0), H = k.size(1), S = k.size(2), D = k.size(3);
  PathKeyBlocks kb;
  kb.length = S;
  kb.block = std::min(block, (S + multiple - 1) / multiple * multiple);
  const int64_t b = kb.block, n = kb.blocks = (S + b - 1) / b;
  const auto opts = k.options();
  kb.keys = block_major(pad_tokens(k, n * b).view({B, H, n, b, D}));
  kb.w = block_major(pad_tokens(t.w, n * b).view({B, H, n, b, D}));
  const torch::Tensor beta = block_major(pad_tokens(t.beta.unsqueeze(-1), n * b).view({B, H, n, b}));  // 0: H = I
  // The UT transform: T = (I + diag(beta) L)^-1 diag(beta) with L = strictly_lower(W W^T), so a row
  // x taken through the block from its end down is x - (x W^T T) W.
  const torch::Tensor unit = torch::eye(b, opts).expand({n, B * H, b, b});
  const torch::Tensor lower = strictly_lower(at::matmul(kb.w, kb.w.transpose(-1, -2)));
  kb.transform = at::linalg_solve_triangular(unit + beta.unsqueeze(-1) * lower, torch::diag_embed(beta),
                                             /*upper=*/false, /*left=*/true, /*unitriangular=*/true);
  kb.key_reach = strictly_lower(at::matmul(kb.w, kb.keys.transpose(-1, -2)));  // w_s . k_j, s > j
  // Keys carried to the block's end: k_j - sum_{s > j} (T key_reach)[s, j] w_s.
  kb.carried = kb.keys - at::matmul(at::matmul(kb.transform, kb.key_reach).transpose(-1, -2), kb.w);
  kb.product = torch::eye(D, opts) - at::matmul(kb.w.transpose(-1, -2), at::matmul(kb.transform, kb.w));
  return kb;
}

PathQueryBlocks path_query_blocks(const torch::Tensor& q, const PathKeyBlocks& kb, int64_t first, int64_t nq) {
  const int64_t B = q.size(0), H = q.size(1), S = kb.length, D = q.size(3), b = kb.block;
  // Within the query blocks: row i's coefficients on w_t (t <= i) are A = tril(Q W^T) T, so its
  // score with key j of the block is q_i . k_j - sum_{j < s <= i} A[i, s] (w_s . k_j), and the
  // row carried to the block's start is q_i - A W.
  const torch::Tensor P = block_major(
      pad_tokens(part(q, 2, first * b, std::min(S, (first + nq) * b) - first * b), nq * b).view({B, H, nq, b, D}));
  const torch::Tensor Wq = part(kb.w, 0, first, nq), Kq = part(kb.keys, 0, first, nq);
  const torch::Tensor A = at::matmul(at::matmul(P, Wq.transpose(-1, -2)).tril(), part(kb.transform, 0, first, nq));
  const torch::Tensor own =
      (at::matmul(P, Kq.transpose(-1, -2)) - at::matmul(A, part(kb.key_reach, 0, first, nq))).tril();
  return {own, P - at::matmul(A, Wq)};
}

torch::Tensor path_scores(const torch::Tensor& q, const PathKeyBlocks& kb, int64_t begin, int64_t end) {
  const int64_t B = q.size(0), S = kb.length, b = kb.block, n = kb.blocks;
  const int64_t first = begin / b, last = (end + b - 1) / b;  // query blocks [first, last)
  const PathQueryBlocks queries = path_query_blocks(q, kb, first, last - first);
  // Earlier blocks, nearest first: the rows . carried keys, then the rows absorb that block's
  // product; at distance d only the query blocks c >= d have a key block c - d.
  const torch::Tensor earlier = path_sweep(queries.rows, kb.carried, kb.product, first);
  const torch::Tensor rows = path_rows(queries.own, earlier, first, n, B);
  return part(part(rows, 2, begin - first * b, end - begin), 3, 0, S);
}

torch::Tensor path_scores(const torch::Tensor& q, const torch::Tensor& k, const PathTransforms& t, int64_t begin,
                          int64_t end, int64_t block) {
  return path_scores(q, path_key_blocks(k, t, block), begin, end);
}

torch::Tensor path_attention_swept(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   const PathTransforms& t, const torch::Tensor& gate, double scale, int64_t block) {
  torch::NoGradGuard no_grad;
  const int64_t B = q.size(0), H = q.size(1), S = q.size(2), D = q.size(3);
  const PathKeyBlocks keys = path_key_blocks(k, t, block);
  const int64_t b = keys.block, n = keys.blocks;
  const PathQueryBlocks queries = path_query_blocks(q, keys, 0, n);
  PathSweepBlocks blocks{queries.own, queries.rows, keys.carried, keys.product,
                         block_major(pad_tokens(v, n * b).view({B, H, n, b, D}))};
  if (gate.defined()) blocks.gate = block_major(pad_tokens(gate.unsqueeze(-1), n * b).view({B, H, n, b}));
  const torch::Tensor out = path_attention_by_sweep(blocks, scale);  // [n, BH, b, D]
  return out.view({n, B, H, b, D}).permute({1, 2, 0, 3, 4}).reshape({B, H, n * b, D}).narrow(2, 0, S);
}

PathImpl::PathImpl(const config::PathConfig& config, int64_t num_layers, int64_t hidden, int64_t heads)
    : config_(config), heads_(heads) {
  traits_.forms_scores = true;
  traits_.keys_prefix = false;  // its key blocks cover the layer's S keys, built once per layer
  traits_.rotation = Rotation::none;
  traits_.term = ops::PathTerm::properties();
  // Its whole softmax attention in blocks (attend_in_blocks) trains in linear memory where the
  // blocks take the shapes (on the CPU; elsewhere the plan finds no tile shape); else the explicit
  // scores, faster than its walk's recomputed gradient.
  traits_.term->tile_backward = config.block % 8 == 0 && (hidden / heads) % 8 == 0;
  traits_.term->backward_softmax_only = true;
  traits_.evaluates_in_blocks = true;  // off the CPU's tiles, the sweep with an online softmax
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
  // The three small projections of x (w's down projection, beta's and the gate's logits) as one
  // product: one pass over x forward and one per gradient backward.
  const torch::Tensor& down = l->w_proj[0]->as<torch::nn::Linear>()->weight;
  std::vector<torch::Tensor> weights{down, l->bt_proj->weight},
      biases{torch::zeros({down.size(0)}, down.options()), l->bt_proj->bias};
  std::vector<int64_t> widths{down.size(0), heads_};
  if (l->g_proj) {
    weights.push_back(l->g_proj->weight);
    biases.push_back(l->g_proj->bias);
    widths.push_back(heads_);
  }
  const std::vector<torch::Tensor> projected =
      at::linear(x, torch::cat(weights), torch::cat(biases)).split_with_sizes(widths, -1);
  torch::Tensor wx = at::linear(projected[0], l->w_proj[1]->as<torch::nn::Linear>()->weight);  // [B, S, hidden]
  torch::Tensor w = wx.view({B, S, heads_, D});
  if (l->w_conv1d && !segments.defined() && ops::conv_silu_norm_takes(w)) {
    w = ops::conv_silu_norm(w, l->w_conv1d->weight, kL2NormEps);  // one fused pass
  } else {
    if (l->w_conv1d) wx = torch::silu(short_convolution(wx, l->w_conv1d->weight, segments));
    w = wx.to(acc).view({B, S, heads_, D});
    w = w * torch::rsqrt((w * w).sum(-1, /*keepdim=*/true) + kL2NormEps);
  }
  const torch::Tensor beta = 2.0 * torch::sigmoid(projected[1].to(acc));
  const torch::Tensor c =
      l->g_proj ? torch::log_sigmoid(projected[2].to(acc)).cumsum(1) : torch::zeros({B, S, heads_}, w.options());
  // [B, H, S, D + 2] whose memory is [B, S, H, D + 2]: the blocks read it in place, and its gradient
  // reaches w, beta and c as slices.
  return torch::cat({w, beta.unsqueeze(-1), c.unsqueeze(-1)}, -1).transpose(1, 2);
}

torch::Tensor PathImpl::content_scores(const torch::Tensor& q, const torch::Tensor& k,
                                       const torch::Tensor& /*positions*/, int64_t begin, int64_t end,
                                       const torch::Tensor& state) {
  const int64_t D = q.size(-1);
  const auto acc = state.scalar_type();
  if (begin == 0 || !key_blocks_state_.is_same(state) || key_blocks_.length != k.size(2)) {
    key_blocks_ = path_key_blocks(k.to(acc), {state.narrow(-1, 0, D), state.select(-1, D)}, config_.block);
    key_blocks_state_ = state;
  }
  const torch::Tensor scores = path_scores(q.to(acc), key_blocks_, begin, end) * score_scale(D);
  if (end == k.size(2)) {  // the layer's last rows: let the key blocks (and their graph) go
    key_blocks_ = PathKeyBlocks{};
    key_blocks_state_ = torch::Tensor();
  }
  return scores;
}

torch::Tensor PathImpl::score_term(const torch::Tensor& q, const torch::Tensor& /*k*/, const torch::Tensor& /*scores*/,
                                   const torch::Tensor& /*positions*/, int64_t /*layer*/, int64_t begin, int64_t end,
                                   const torch::Tensor& state) {
  if (!config_.forget_gate) return {};
  const int64_t D = q.size(-1);
  const torch::Tensor c = state.select(-1, D + 1);  // [B, H, S]
  return (c.narrow(2, begin, end - begin).unsqueeze(-1) - c.unsqueeze(2)) * score_scale(D);
}

std::optional<torch::Tensor> PathImpl::attend_in_blocks(const torch::Tensor& q, const torch::Tensor& k,
                                                        const torch::Tensor& v, const torch::Tensor& state,
                                                        double scale) {
  const int64_t D = q.size(-1);
  const auto acc = state.scalar_type();
  const torch::Tensor values = v.to(acc);
  if (!ops::path_block_attention_takes(values, config_.block)) return std::nullopt;
  const ops::PathBlocks blocks = ops::path_blocks(q.to(acc), k.to(acc), state, config_.block);
  const torch::Tensor gate = config_.forget_gate ? state.select(-1, D + 1) : torch::Tensor();
  return ops::path_block_attention(blocks, values, gate, scale).to(v.scalar_type());
}

torch::Tensor PathImpl::evaluate_in_blocks(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                           const torch::Tensor& state, double scale) {
  const int64_t D = q.size(-1);
  const auto acc = state.scalar_type();
  // Blocks of at least 128 tokens: a quarter of the steps at PaTH's default 32 (a GPU launches a
  // dozen ops per step), and faster on the CPU too (docs/kernels.md); equal results.
  const int64_t block = std::max<int64_t>(config_.block, 128);
  const torch::Tensor gate = config_.forget_gate ? state.select(-1, D + 1) : torch::Tensor();
  return path_attention_swept(q.to(acc), k.to(acc), v.to(acc), {state.narrow(-1, 0, D), state.select(-1, D)}, gate,
                              scale, block)
      .to(v.scalar_type());
}

std::optional<ops::TileTerm> PathImpl::tile_term(const torch::Tensor& /*q*/, const torch::Tensor& /*k*/,
                                                 const torch::Tensor& /*positions*/, int64_t /*layer*/,
                                                 const torch::Tensor& state, bool /*causal: PaTH is*/) {
  return ops::TileTerm{ops::PathTerm{state, config_.forget_gate}};  // state [B, H, S, D + 2]: w, beta, c
}

double PathImpl::score_term_bytes_per_pair(int64_t batch, int64_t heads, double /*elem*/) const {
  // PaTH's swept blocks (about half a pair's), their rows and the scaled scores, in fp32: about
  // 2.5 floats a pair; 5 as sized for the earlier form (stacked, gathered, plain q.k and the
  // term), kept as the conservative bound the query blocks were measured with.
  return 5.0 * 4.0 * double(batch) * double(heads);
}

std::shared_ptr<PositionEncodingImpl> make_path_position(const config::ModelConfig& m) {
  return std::make_shared<PathImpl>(m.position.path, m.num_layers, m.hidden_size, m.num_heads);
}

}  // namespace roformer::model
