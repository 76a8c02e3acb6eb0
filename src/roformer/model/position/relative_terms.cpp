// Shaw, Transformer-XL and DeBERTa score terms (see relative_terms.h). Tables indexed by
// relative distance are looked up by gathering from q (or k) times the table: [B, H, C, R]
// then [B, H, C, S] for C query rows, never a [S, S, D] tensor of per-pair embeddings.
#include "roformer/model/position/relative_terms.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "roformer/model/position/offset_rows.h"

namespace roformer::model {
namespace {

// out[.., r, j] = positions[.., begin + r] - positions[.., j] (query minus key) for query rows
// [begin, end): [C, S] or [B, C, S]
torch::Tensor query_minus_key(const torch::Tensor& positions, int64_t begin, int64_t end) {
  return positions.narrow(-1, begin, end - begin).unsqueeze(-1) - positions.unsqueeze(-2);
}

// An index [R, C] or [B, R, C] viewed as [B, H, R, C] to gather from / scatter into `like`.
torch::Tensor per_head(const torch::Tensor& index, const torch::Tensor& like) {
  const torch::Tensor i = index.dim() == 2 ? index.unsqueeze(0).unsqueeze(0) : index.unsqueeze(1);
  return i.expand({like.size(0), like.size(1), index.size(-2), index.size(-1)});
}

// A table built from shared positions [S] (0..S-1) is cached per length; explicit [B, S] ones are not.
torch::Tensor cached(TableCache& cache, const torch::Tensor& positions, torch::ScalarType dtype,
                     const std::function<torch::Tensor()>& build) {
  if (positions.dim() == 2) return build();
  return cache.get(positions.device(), positions.size(0), dtype, build);
}

// x [B, H, S, D] times a per-head matrix w [H, D, N] -> [B, H, S, N].
torch::Tensor per_head_matmul(const torch::Tensor& x, const torch::Tensor& w) {
  return torch::matmul(x, w.to(x.scalar_type()).unsqueeze(0));
}

}  // namespace

// ---- Shaw et al. 2018 ----

ShawTablesImpl::ShawTablesImpl(int64_t max_distance, int64_t head_dim, bool values) {
  relative_key = register_module("relative_key", torch::nn::Embedding(2 * max_distance + 1, head_dim));
  if (values) relative_value = register_module("relative_value", torch::nn::Embedding(2 * max_distance + 1, head_dim));
}

ShawImpl::ShawImpl(const config::ShawConfig& config, int64_t num_layers, int64_t head_dim) : config_(config) {
  traits_.forms_scores = true;
  traits_.term = ops::RelativeTerm::properties();
  layer = register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < (config.per_layer ? num_layers : 1); ++i) {
    tables_.emplace_back(config.max_distance, head_dim, config.values);
    layer->push_back(tables_.back());
  }
}

torch::Tensor ShawImpl::table_index(const torch::Tensor& positions, int64_t begin, int64_t end) {
  const int64_t k = config_.max_distance;
  auto build = [&] {  // key minus query, clipped: one allocation (at long lengths each block builds one)
    return (positions.unsqueeze(-2) - positions.narrow(-1, begin, end - begin).unsqueeze(-1)).clamp_(-k, k).add_(k);
  };
  if (positions.dim() == 2) return build();
  // Per length, or per block of rows at long lengths (the value term reuses the score term's).
  return index_.get(positions.device(), positions.size(0), torch::kLong, build, begin, end);
}

std::pair<int64_t, int64_t> ShawImpl::clipped_columns(const torch::Tensor& positions, int64_t begin, int64_t end,
                                                      int64_t keys) const {
  if (positions.dim() == 2) return {0, keys};  // explicit positions: no band known
  const int64_t k = config_.max_distance;
  const int64_t first = std::clamp<int64_t>(begin - k + 1, 0, keys);  // j <= i - k for every row
  return {first, std::clamp<int64_t>(end - 1 + k, first, keys)};      // from here j >= i + k for every row
}

torch::Tensor ShawImpl::score_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& /*scores*/,
                                   const torch::Tensor& positions, int64_t layer_index, int64_t begin, int64_t end,
                                   const torch::Tensor& /*state*/) {
  const torch::Tensor& w = tables(layer_index)->relative_key->weight;  // [2k+1, D]
  const int64_t B = q.size(0), H = q.size(1), C = end - begin, K = k.size(2), R = w.size(0);
  const torch::Tensor rows = q.narrow(2, begin, C);
  const torch::Tensor by_distance = torch::matmul(rows, w.to(q.scalar_type()).t());  // q_i . w_r: [B, H, C, 2k+1]
  // Keys past the clip on either side take the first or last table row for the whole block:
  // those columns are one value per row; only the band between them is gathered.
  const auto [first, last] = clipped_columns(positions, begin, end, K);
  std::vector<torch::Tensor> parts;
  if (first > 0) parts.push_back(by_distance.narrow(-1, 0, 1).expand({B, H, C, first}));
  if (last > first) {
    const torch::Tensor index = table_index(positions, begin, end).narrow(-1, first, last - first);
    parts.push_back(by_distance.gather(-1, per_head(index, rows)));
  }
  if (last < K) parts.push_back(by_distance.narrow(-1, R - 1, 1).expand({B, H, C, K - last}));
  const torch::Tensor term = parts.size() == 1 ? parts[0] : torch::cat(parts, -1);
  return term * score_scale(q.size(-1));
}

torch::Tensor ShawImpl::output_term(const torch::Tensor& probs, const torch::Tensor& positions, int64_t layer_index,
                                    int64_t begin) {
  if (!config_.values) return {};
  const torch::Tensor& w = tables(layer_index)->relative_value->weight;  // [2k+1, D]
  const int64_t C = probs.size(2), K = probs.size(-1), R = w.size(0);
  // sum_j p_ij w_r(i,j) = sum_r (sum of p_ij over the j at distance row r) w_r; past the clip
  // on either side the sum is the row's sum over those columns.
  // The sums accumulate in fp32 (fp64 for a double model), whatever the weights' dtype: in bf16
  // a sum over thousands of keys loses the small weights, and CUDA autocast's sums are fp32.
  const auto [first, last] = clipped_columns(positions, begin, begin + C, K);
  const torch::ScalarType sums = probs.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  torch::Tensor per_row = torch::zeros({probs.size(0), probs.size(1), C, R}, probs.options().dtype(sums));
  if (last > first) {
    const torch::Tensor index =
        per_head(table_index(positions, begin, begin + C).narrow(-1, first, last - first), probs);
    per_row = per_row.scatter_add(-1, index, probs.narrow(-1, first, last - first).to(sums));
  }
  const auto opts = torch::dtype(torch::kLong).device(probs.device());
  auto row_sum = [&](int64_t from, int64_t n) { return probs.narrow(-1, from, n).sum(-1, /*keepdim=*/true, sums); };
  if (first > 0) per_row = per_row.index_add(-1, torch::zeros({1}, opts), row_sum(0, first));
  if (last < K) per_row = per_row.index_add(-1, torch::full({1}, R - 1, opts), row_sum(last, K - last));
  return torch::matmul(per_row.to(probs.scalar_type()), w.to(probs.scalar_type()));  // [B, H, C, D]
}

std::optional<ops::TileTerm> ShawImpl::tile_term(const torch::Tensor& q, const torch::Tensor& /*k*/,
                                                 const torch::Tensor& positions, int64_t layer_index,
                                                 const torch::Tensor& /*state*/, bool causal) {
  if (positions.dim() != 1) return std::nullopt;
  const int64_t H = q.size(1), S = q.size(2), D = q.size(3), k = config_.max_distance, origin = causal ? 0 : S - 1;
  // Key j = i - d sits at clip(j - i, -k, k) + k = k - clip(d, -k, k); distances from -origin.
  const torch::Tensor d = torch::arange(-origin, S, torch::dtype(torch::kLong).device(q.device()));
  const torch::Tensor row = k - d.clamp(-k, k);
  auto by_distance = [&](const torch::nn::Embedding& table) {  // heads share it
    return table->weight.to(q.scalar_type()).index_select(0, row).unsqueeze(0).expand({H, origin + S, D});
  };
  ops::RelativeTerm relative{q, by_distance(tables(layer_index)->relative_key)};
  if (config_.values) relative.value_table = by_distance(tables(layer_index)->relative_value);
  relative.origin = origin;
  return ops::TileTerm{relative};
}

// ---- Transformer-XL (Dai et al. 2019) ----

XlLayerImpl::XlLayerImpl(int64_t hidden, int64_t num_heads) {
  r_net = register_module("r_net", torch::nn::Linear(torch::nn::LinearOptions(hidden, hidden).bias(false)));
  r_w_bias = register_parameter("r_w_bias", torch::zeros({num_heads, hidden / num_heads}));
  r_r_bias = register_parameter("r_r_bias", torch::zeros({num_heads, hidden / num_heads}));
}

TransformerXlImpl::TransformerXlImpl(int64_t num_layers, int64_t hidden, int64_t num_heads) : hidden_(hidden) {
  traits_.forms_scores = true;
  traits_.term = ops::RelativeTerm::properties();
  layer = register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < num_layers; ++i) {
    layers_.emplace_back(hidden, num_heads);
    layer->push_back(layers_.back());
  }
}

// Terms (b) + (d) need (q_i + v) . W_kr R_{i-j}, with R_d = [sin(d w_f), cos(d w_f)] and
// w_f = 10000^(-2f/hidden). With p = W_kr^T (q_i + v) split into its sin and cos halves, the
// angle-difference identities make it a product of a per-query and a per-key factor:
//   p_s.sin((m-n)w) + p_c.cos((m-n)w) = [p_s sin(mw) + p_c cos(mw)].cos(nw) + [p_c sin(mw) - p_s cos(mw)].sin(nw)
// so no [S, S, hidden] tensor of R_{i-j} is formed and any position values work.
std::optional<ops::TileTerm> TransformerXlImpl::tile_term(const torch::Tensor& q, const torch::Tensor& /*k*/,
                                                          const torch::Tensor& positions, int64_t layer_index,
                                                          const torch::Tensor& /*state*/, bool causal) {
  if (positions.dim() != 1) return std::nullopt;
  const XlLayer& l = layers_[static_cast<size_t>(layer_index)];
  const int64_t H = q.size(1), S = q.size(2), D = q.size(3), half = hidden_ / 2, origin = causal ? 0 : S - 1;
  const auto opts = torch::dtype(torch::kFloat64).device(q.device());
  const torch::Tensor w = torch::pow(10000.0, -2.0 * torch::arange(half, opts) / static_cast<double>(hidden_));
  const torch::Tensor a = torch::arange(-origin, S, opts).unsqueeze(-1) * w;                   // [origin + S, half]
  const torch::Tensor R = torch::cat({torch::sin(a), torch::cos(a)}, -1).to(q.scalar_type());  // R_d from d = -origin
  const torch::Tensor w_kr = l->r_net->weight.to(q.scalar_type()).view({H, D, hidden_});
  ops::RelativeTerm relative{q + l->r_r_bias.to(q.scalar_type()).view({1, H, 1, D}),
                             torch::matmul(R.unsqueeze(0), w_kr.transpose(1, 2))};  // table [H, origin + S, D]
  relative.origin = origin;
  ops::TileTerm term{relative};
  term.q = q + l->r_w_bias.to(q.scalar_type()).view({1, H, 1, D});
  return term;
}

torch::Tensor TransformerXlImpl::score_term(const torch::Tensor& q, const torch::Tensor& k,
                                            const torch::Tensor& /*scores*/, const torch::Tensor& positions,
                                            int64_t layer_index, int64_t begin, int64_t end,
                                            const torch::Tensor& /*state*/) {
  const XlLayer& l = layers_[static_cast<size_t>(layer_index)];
  const int64_t H = q.size(1), D = q.size(3), half = hidden_ / 2;
  const torch::Tensor angles = cached(angles_, positions, torch::kFloat64, [&] {
    const torch::Tensor f = torch::arange(half, torch::dtype(torch::kFloat64).device(positions.device()));
    const torch::Tensor w = torch::pow(10000.0, -2.0 * f / static_cast<double>(hidden_));  // [half]
    const torch::Tensor a = positions.to(torch::kFloat64).unsqueeze(-1) * w;               // [.., S, half]
    return torch::cat({torch::sin(a), torch::cos(a)}, -1);
  });
  // [S, hidden] -> [1, 1, S, hidden]; [B, S, hidden] -> [B, 1, S, hidden]
  const torch::Tensor trig = (angles.dim() == 2 ? angles.unsqueeze(0) : angles).unsqueeze(1).to(q.scalar_type());
  const torch::Tensor trig_m = trig.narrow(-2, begin, end - begin);  // the query rows: [.., 1, C, hidden]
  const torch::Tensor sin_m = trig_m.narrow(-1, 0, half), cos_m = trig_m.narrow(-1, half, half);
  const torch::Tensor w_kr = l->r_net->weight.view({H, D, hidden_});  // [H, D, hidden]
  const torch::Tensor p =
      per_head_matmul(q.narrow(2, begin, end - begin) + l->r_r_bias.to(q.scalar_type()).view({1, H, 1, D}),
                      w_kr);  // [B, H, C, hidden]
  const torch::Tensor p_s = p.narrow(-1, 0, half), p_c = p.narrow(-1, half, half);
  const torch::Tensor query_side = torch::cat({p_s * sin_m + p_c * cos_m, p_c * sin_m - p_s * cos_m}, -1);
  const torch::Tensor keys = trig.narrow(-2, 0, k.size(2));  // keys [0, K)
  const torch::Tensor key_side =
      torch::cat({keys.narrow(-1, half, half), keys.narrow(-1, 0, half)}, -1);     // [cos_n, sin_n]
  const torch::Tensor bd = torch::matmul(query_side, key_side.transpose(-2, -1));  // [B, H, C, S]
  const torch::Tensor c =
      torch::matmul(k, l->r_w_bias.to(k.scalar_type()).view({1, H, D, 1}));  // u . k_j: [B, H, S, 1]
  return (bd + c.transpose(-2, -1)) * score_scale(D);
}

// ---- DeBERTa (He et al. 2021) ----

torch::Tensor deberta_bucket(const torch::Tensor& delta, int64_t position_buckets, int64_t max_relative_positions) {
  if (max_relative_positions <= 0) return delta;
  const double mid = static_cast<double>(position_buckets / 2);
  const torch::Tensor far = delta.abs().to(torch::kFloat64).clamp_min(mid);  // the log is only used where |delta| > mid
  const torch::Tensor log_bucket =
      torch::ceil(torch::log(far / mid) / std::log((static_cast<double>(max_relative_positions) - 1) / mid) *
                  (mid - 1)) +
      mid;
  return torch::where(delta.abs() <= static_cast<int64_t>(mid), delta, (log_bucket * delta.sign()).to(torch::kLong));
}

DebertaLayerImpl::DebertaLayerImpl(int64_t hidden) {
  pos_key_proj = register_module("pos_key_proj", torch::nn::Linear(hidden, hidden));
  pos_query_proj = register_module("pos_query_proj", torch::nn::Linear(hidden, hidden));
}

DebertaImpl::DebertaImpl(const config::DebertaConfig& config, int64_t num_layers, int64_t hidden) : config_(config) {
  traits_.forms_scores = true;
  traits_.term = ops::BucketTerm::properties();
  rel_embeddings = register_module("rel_embeddings", torch::nn::Embedding(2 * config.position_buckets, hidden));
  layer = register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < num_layers; ++i) {
    layers_.emplace_back(hidden);
    layer->push_back(layers_.back());
  }
}

// delta(i, j) = clip(bucket(i - j) + k, 0, 2k - 1). With positions 0..S-1 it depends on the
// offset alone: bucketed once per length over the 2S - 1 offsets, then gathered by row.
std::pair<torch::Tensor, torch::Tensor> DebertaImpl::table_index(const torch::Tensor& positions, int64_t begin,
                                                                 int64_t end) {
  const int64_t span = config_.position_buckets;
  auto delta_of = [&](const torch::Tensor& i_minus_j) {
    return (deberta_bucket(i_minus_j, span, config_.max_relative_positions) + span).clamp(0, 2 * span - 1);
  };
  if (positions.dim() == 2) {
    const torch::Tensor d = query_minus_key(positions, begin, end);  // [B, C, S]
    return {delta_of(d), delta_of(-d)};
  }
  const int64_t S = positions.size(0);
  // Column S - 1 + o holds delta(i, j) for key - query j - i = o; flipped, delta(j, i).
  const torch::Tensor by_offset = cached(deltas_, positions, torch::kLong, [&] {
    return delta_of(-torch::arange(1 - S, S, torch::dtype(torch::kLong).device(positions.device()))).unsqueeze(0);
  });
  return {toeplitz_rows(by_offset, begin, end)[0], toeplitz_rows(by_offset.flip(-1), begin, end)[0]};
}

torch::Tensor DebertaImpl::shared_table() const {
  // A view of its own per block: the block's two uses sum into one gradient before the layers'
  // are added, as they do when the layer is recomputed (activation checkpointing), so both runs
  // add in the same order.
  return rel_embeddings->weight.view_as(rel_embeddings->weight);  // [2k, hidden]
}

torch::Tensor DebertaImpl::position_heads(const torch::Tensor& P, const torch::nn::Linear& proj, int64_t heads,
                                          int64_t head_dim) const {
  const int64_t span = config_.position_buckets;
  return at::linear(P, proj->weight, proj->bias).view({2 * span, heads, head_dim}).permute({1, 2, 0});
}

torch::Tensor DebertaImpl::layer_state(const torch::Tensor& /*x*/, const torch::Tensor& k,
                                       const torch::Tensor& /*positions*/, int64_t layer_index,
                                       const torch::Tensor& /*segments*/) {
  if (torch::GradMode::is_enabled()) return {};  // with autograd each block forms its own (see shared_table)
  const DebertaLayer& l = layers_[static_cast<size_t>(layer_index)];
  return key_positions(k, position_heads(shared_table(), l->pos_query_proj, k.size(1), k.size(3)));
}

torch::Tensor DebertaImpl::key_positions(const torch::Tensor& k, const torch::Tensor& heads) {
  return torch::matmul(heads.transpose(-2, -1).to(k.scalar_type()).unsqueeze(0), k.transpose(-2, -1));  // [B, H, 2k, K]
}

// c2p(i, j) = q_i . K^r_{delta(i,j)} and p2c(i, j) = k_j . Q^r_{delta(j,i)} (the paper's Eq. 4;
// Hugging Face's DebertaV2 indexes p2c by delta(i,j) instead). p2c gathers column j of
// Q_r K^T (layer_state's, for the keys [0, K)) at row delta(j, i): [B, H, C, K] as the scores are.
std::optional<ops::TileTerm> DebertaImpl::tile_term(const torch::Tensor& q, const torch::Tensor& k,
                                                    const torch::Tensor& positions, int64_t layer_index,
                                                    const torch::Tensor& state, bool causal) {
  if (positions.dim() != 1) return std::nullopt;
  const DebertaLayer& l = layers_[static_cast<size_t>(layer_index)];
  const int64_t H = q.size(1), S = q.size(2), D = q.size(3), span = config_.position_buckets;
  const torch::Tensor P = shared_table();
  auto delta_of = [&](const torch::Tensor& i_minus_j) {
    return (deberta_bucket(i_minus_j, span, config_.max_relative_positions) + span).clamp(0, 2 * span - 1);
  };
  const int64_t origin = causal ? 0 : S - 1;  // distances i - j from -origin
  const torch::Tensor d = torch::arange(-origin, S, torch::dtype(torch::kLong).device(q.device()));
  ops::BucketTerm buckets;
  buckets.by_query = per_head_matmul(q, position_heads(P, l->pos_key_proj, H, D));  // [B, H, S, 2k]
  // [B, H, 2k, S]: layer_state's, or (training, where it is left undefined) formed here.
  buckets.by_key = state.defined() ? state : key_positions(k, position_heads(P, l->pos_query_proj, H, D));
  buckets.query_bucket = delta_of(d);  // delta(i, j) for i - j = d
  buckets.key_bucket = delta_of(-d);   // delta(j, i)
  buckets.origin = origin;
  return ops::TileTerm{buckets};
}

torch::Tensor DebertaImpl::score_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& /*scores*/,
                                      const torch::Tensor& positions, int64_t layer_index, int64_t begin, int64_t end,
                                      const torch::Tensor& state) {
  const DebertaLayer& l = layers_[static_cast<size_t>(layer_index)];
  const int64_t H = q.size(1), D = q.size(3), K = k.size(2);
  const auto [c2p_all, p2c_all] = table_index(positions, begin, end);  // [.., C, S] each
  const torch::Tensor c2p_index = c2p_all.narrow(-1, 0, K), p2c_index = p2c_all.narrow(-1, 0, K);
  const torch::Tensor rows = q.narrow(2, begin, end - begin);
  const torch::Tensor P = shared_table();
  const torch::Tensor c2p =
      per_head_matmul(rows, position_heads(P, l->pos_key_proj, H, D)).gather(-1, per_head(c2p_index, rows));
  const torch::Tensor keys =
      (state.defined() ? state : key_positions(k, position_heads(P, l->pos_query_proj, H, D))).narrow(-1, 0, K);
  const torch::Tensor p2c = keys.gather(2, per_head(p2c_index, rows));
  return (c2p + p2c) * score_scale(D);
}

std::shared_ptr<PositionEncodingImpl> make_shaw_position(const config::ModelConfig& m) {
  return std::make_shared<ShawImpl>(m.position.shaw, m.num_layers, m.head_dim());
}

std::shared_ptr<PositionEncodingImpl> make_transformer_xl_position(const config::ModelConfig& m) {
  return std::make_shared<TransformerXlImpl>(m.num_layers, m.hidden_size, m.num_heads);
}

std::shared_ptr<PositionEncodingImpl> make_deberta_position(const config::ModelConfig& m) {
  return std::make_shared<DebertaImpl>(m.position.deberta, m.num_layers, m.hidden_size);
}

}  // namespace roformer::model
