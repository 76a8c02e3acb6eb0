// Self-attention (see attention.h).
#include "roformer/model/attention.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "roformer/common/log.h"
#include "roformer/model/attention_kernel.h"
#include "roformer/model/attention_plan.h"
#include "roformer/model/linear_attention.h"
#include "roformer/model/stick_breaking.h"
#include "roformer/ops/short_attention/short_attention.h"
#include "roformer/ops/tile_attention/tile_attention.h"

namespace roformer::model {
namespace {

// rows(begin, end) for the query rows [from, S) in blocks of `block` rows, joined along the query
// axis of [B, H, C, D] outputs; one call when a block holds them all. Without autograd each block
// is copied into one output allocated up front (BSHD in memory, what the caller's transpose
// wants) and freed before the next: a block result kept alive until a final cat would sit
// among the next block's large temporaries, and the heap would then grow with S^2.
torch::Tensor in_query_blocks(int64_t S, int64_t block, const std::function<torch::Tensor(int64_t, int64_t)>& rows,
                              int64_t from = 0) {
  if (from + block >= S) return rows(from, S);
  if (torch::GradMode::is_enabled()) {
    std::vector<torch::Tensor> parts;
    for (int64_t begin = from; begin < S; begin += block) parts.push_back(rows(begin, std::min(S, begin + block)));
    return torch::cat(parts, 2);
  }
  torch::Tensor out;  // [B, H, S - from, D], a view of [B, S - from, H, D] memory
  for (int64_t begin = from; begin < S; begin += block) {
    const int64_t end = std::min(S, begin + block);
    const torch::Tensor part = rows(begin, end);
    if (!out.defined())
      out = torch::empty({part.size(0), S - from, part.size(1), part.size(3)}, part.options()).transpose(1, 2);
    out.narrow(2, begin - from, end - begin).copy_(part);
  }
  return out;
}

// SDPA, and its backend for an active kernel probe.
torch::Tensor sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                   const std::optional<torch::Tensor>& mask, double dropout, bool causal) {
  if (auto* probe = AttentionKernelProbe::active()) probe->record(sdpa_kernel_for(q, k, v, mask, dropout, causal));
  return at::scaled_dot_product_attention(q, k, v, mask, dropout, causal);
}

void record_kernel(const char* kernel) {
  if (auto* probe = AttentionKernelProbe::active()) probe->record(kernel);
}

}  // namespace

torch::Tensor logn_scale(const torch::Tensor& positions, int64_t length) {
  const torch::Tensor p = positions.to(torch::kFloat64);
  return (torch::log1p(p) / std::log(static_cast<double>(length))).clamp_min(1.0);
}

torch::Tensor ssmax_log_keys(int64_t S, bool causal, const torch::Tensor& key_keep, const torch::Device& device) {
  const auto opts = torch::dtype(torch::kFloat64).device(device);
  if (causal) return torch::log(torch::arange(1, S + 1, opts)).view({1, 1, S, 1});
  if (!key_keep.defined()) return torch::full({1, 1, 1, 1}, std::log(static_cast<double>(S)), opts);
  return torch::log(key_keep.to(opts).sum(-1).clamp_min(1.0)).view({-1, 1, 1, 1});
}

torch::Tensor ssmax_log_keys_in_documents(const torch::Tensor& segments, const torch::Tensor& positions, bool causal) {
  const int64_t B = segments.size(0), S = segments.size(1);
  const auto opts = torch::dtype(torch::kFloat64).device(segments.device());
  if (causal) return torch::log(positions.to(opts) + 1.0).view({B, 1, S, 1});
  const torch::Tensor lengths = torch::zeros({B, S}, opts).scatter_add_(1, segments, torch::ones({B, S}, opts));
  return torch::log(lengths.gather(1, segments)).view({B, 1, S, 1});
}

HeadNormImpl::HeadNormImpl(int64_t heads, int64_t head_dim, double eps, double offset) : eps_(eps), offset_(offset) {
  weight = register_parameter("weight", torch::full({heads, head_dim}, 1.0 - offset));
}

torch::Tensor HeadNormImpl::forward(const torch::Tensor& x) const {
  const torch::Tensor normed = rms_normalized(x, eps_);
  torch::Tensor scale = weight.to(normed.scalar_type()).unsqueeze(1);  // [heads, 1, D]
  if (offset_ != 0.0) scale = scale + offset_;
  return (normed * scale).to(x.scalar_type());
}

torch::Tensor llama4_scale(const torch::Tensor& positions, double floor, double factor) {
  const torch::Tensor p = positions.to(torch::kFloat64);
  return torch::log1p(torch::floor((p + 1.0) / floor)) * factor + 1.0;
}

double drope_scale(int64_t S, int64_t length, double c) {
  return S > length ? 1.0 + c * std::log(static_cast<double>(S) / static_cast<double>(length)) : 1.0;
}

// The FoX authors' ShiftLinear: t [B, heads, S, D] mixed with its previous token (zero before the
// first), a_t = sigmoid(shift(x_t)) per head: a_t t_(t-1) + (1 - a_t) t_t.
static torch::Tensor shifted_by_token(const torch::Tensor& t, const torch::nn::Linear& shift, const torch::Tensor& x) {
  const torch::Tensor a = torch::sigmoid(dense(shift, x).to(at::promote_types(t.scalar_type(), torch::kFloat32)))
                              .transpose(1, 2)
                              .unsqueeze(-1);  // [B, heads, S, 1], in fp32 at least as theirs
  const torch::Tensor previous = torch::constant_pad_nd(t, {0, 0, 1, 0}).slice(2, 0, t.size(2));
  return (a * previous + (1.0 - a) * t).to(t.scalar_type());
}

SelfAttentionProjImpl::SelfAttentionProjImpl(int64_t hidden, int64_t width, int64_t kv_width, bool bias) {
  query = register_module("query", torch::nn::Linear(torch::nn::LinearOptions(hidden, width).bias(bias)));
  key = register_module("key", torch::nn::Linear(torch::nn::LinearOptions(hidden, kv_width).bias(bias)));
  value = register_module("value", torch::nn::Linear(torch::nn::LinearOptions(hidden, kv_width).bias(bias)));
}

AttentionImpl::AttentionImpl(const config::ModelConfig& c, std::shared_ptr<PositionEncodingImpl> position,
                             int64_t layer)
    : heads_(c.num_heads),
      kv_heads_(c.kv_heads()),
      head_dim_(c.head_dim()),
      layer_(layer),
      dropout_(c.attention_dropout),
      kind_(c.attention),
      kernel_(c.attention_kernel),
      linear_(c.linear_attention),
      normalizer_(c.attention_normalizer),
      remainder_(c.stick_breaking_remainder),
      ssmax_init_(c.ssmax_init),
      norm_offset_(c.norm_weight_offset),
      position_(std::move(position)) {
  const int64_t width = c.attention_width();  // hidden_size unless model.head_dim sets another
  self = register_module("self", SelfAttentionProj(c.hidden_size, width, c.kv_heads() * c.head_dim(), c.qkv_bias));
  const double offset = c.norm_weight_offset;
  output = register_module("output", DenseNorm(width, c.hidden_size, c.layer_norm_eps, c.norm_kind, c.output_bias,
                                               offset, c.norm == config::NormPlacement::sandwich));
  if (c.qk_norm) {  // eps: the FoX authors' GroupNorm default 1e-5, or an imported model's own
    q_norm = register_module("q_norm", HeadNorm(heads_, head_dim_, c.qk_norm_eps, offset));
    k_norm = register_module("k_norm", HeadNorm(kv_heads_, head_dim_, c.qk_norm_eps, offset));
  }
  if (c.score_scale_dim > 0)  // q.k / sqrt(score_scale_dim) where every path divides by sqrt(head_dim)
    query_factor_ = std::sqrt(static_cast<double>(head_dim_) / static_cast<double>(c.score_scale_dim));
  if (c.output_gate)
    output_gate =
        register_module("output_gate", torch::nn::Linear(torch::nn::LinearOptions(c.hidden_size, width).bias(false)));
  if (c.output_norm)
    output_norm = register_module("output_norm", HeadNorm(heads_, head_dim_, 1e-6, offset));  // their norm_eps
  if (c.kv_shift) {
    key_shift =
        register_module("key_shift", torch::nn::Linear(torch::nn::LinearOptions(c.hidden_size, kv_heads_).bias(false)));
    value_shift = register_module("value_shift",
                                  torch::nn::Linear(torch::nn::LinearOptions(c.hidden_size, kv_heads_).bias(false)));
  }
  if (c.attention_scale == config::AttentionScale::ssmax)
    ssmax_scale = register_parameter("ssmax_scale", torch::full({heads_}, c.ssmax_init));
  if (kind_ == config::AttentionKind::linear && linear_.feature_map == config::FeatureMap::favor) {
    // From the global generator that build_model seeds: the same model seed gives the same features.
    favor_seed_ = static_cast<uint64_t>(torch::randint(1LL << 40, {1}, torch::kLong).item<int64_t>());
    favor_projection =
        register_buffer("favor_projection", orthogonal_random_projection(head_dim_, head_dim_, favor_seed_));
    favor_forwards = register_buffer("favor_forwards", torch::zeros({}, torch::kLong));
  }
}

void AttentionImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  for (HeadNorm* n : {&q_norm, &k_norm, &output_norm})  // a scale of one: weight 1 - offset
    if (*n) (*n)->weight.fill_(1.0 - norm_offset_);
  if (ssmax_scale.defined()) ssmax_scale.fill_(ssmax_init_);
}

bool AttentionImpl::forms_scores() const {
  return position_->traits().forms_scores || normalizer_ == config::AttentionNormalizer::stick_breaking;
}

void AttentionImpl::maybe_redraw_features() {
  if (!is_training() || linear_.redraw_interval <= 0) return;
  const int64_t seen = favor_forwards.item<int64_t>();  // a host read: FAVOR+ redraws are host-scheduled
  if (seen > 0 && seen % linear_.redraw_interval == 0) {
    torch::NoGradGuard no_grad;
    const uint64_t draw = static_cast<uint64_t>(seen / linear_.redraw_interval);
    favor_projection.copy_(
        orthogonal_random_projection(head_dim_, head_dim_, favor_seed_ + 0x9E3779B97F4A7C15ULL * draw));
  }
  favor_forwards.add_(1);
}

torch::Tensor AttentionImpl::attend_linear(const torch::Tensor& q, const torch::Tensor& k, torch::Tensor& v,
                                           const AttentionContext& ctx) {
  // Features, prefix sums and the normaliser in fp32 (fp64 stays fp64): cumulative sums in bf16
  // lose the small late terms.
  auto up = [](const torch::Tensor& t) { return t.scalar_type() == torch::kFloat64 ? t : t.to(torch::kFloat32); };
  record_kernel(attention_kernel::kLinear);
  torch::Tensor phi_q, phi_k;
  if (linear_.feature_map == config::FeatureMap::favor) {
    maybe_redraw_features();
    phi_q = favor_features(up(q), favor_projection, /*is_query=*/true);
    phi_k = favor_features(up(k), favor_projection, /*is_query=*/false);
  } else {
    phi_q = elu1_features(up(q));
    phi_k = elu1_features(up(k));
  }
  torch::Tensor rot_q = phi_q, rot_k = phi_k, vv = up(v);  // rotate() returns new tensors, never writes these
  position_->rotate(rot_q, rot_k, vv, ctx.positions);      // RoPE: Eq. 19's R_m phi(q_m), R_n phi(k_n)
  return linear_attention(phi_q, phi_k, rot_q, rot_k, vv, ctx.causal, ctx.key_keep).to(v.scalar_type());
}

std::pair<torch::Tensor, torch::Tensor> AttentionImpl::normalise(const torch::Tensor& scores, int64_t begin) const {
  // In fp32 at least (half-precision scores lose the small weights).
  const auto acc = scores.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  if (normalizer_ == config::AttentionNormalizer::softmax) return {torch::softmax(scores.to(acc), -1), {}};
  StickBreaking sb = stick_breaking_weights(scores.to(acc), begin);
  if (remainder_ == config::StickBreakingRemainder::discard) sb.remainder = torch::Tensor();
  return {sb.weights, sb.remainder};
}

int64_t AttentionImpl::visible_keys(const AttentionContext& ctx, int64_t S, int64_t begin, int64_t end) const {
  if (!position_->traits().keys_prefix) return S;
  if (ctx.mask.defined()) return ctx.mask.key_span(begin, end).second;
  return ctx.causal ? end : S;
}

// The rows' additive mask: the encoder's (causal + padding), or the causal flag's -inf above
// the diagonal for a caller without the encoder's mask; `rows` [B|1, H|1, C, K] gains it.
torch::Tensor AttentionImpl::masked_rows(torch::Tensor rows, const AttentionContext& ctx, int64_t begin, int64_t end,
                                         int64_t K) const {
  if (ctx.mask.defined()) return rows + ctx.mask.rows(begin, end, K).to(rows.scalar_type());
  if (!ctx.causal) return rows;
  const auto opts = torch::dtype(torch::kLong).device(rows.device());
  const torch::Tensor future = torch::arange(K, opts).unsqueeze(0) > torch::arange(begin, end, opts).unsqueeze(1);
  return rows.masked_fill(future, -std::numeric_limits<double>::infinity());
}

torch::Tensor AttentionImpl::bias_rows_to_sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                               const AttentionContext& ctx, const torch::Tensor& state, int64_t begin,
                                               int64_t end) {
  const int64_t K = visible_keys(ctx, q.size(2), begin, end);
  const torch::Tensor keys = k.narrow(2, 0, K), values = v.narrow(2, 0, K);
  const torch::Tensor bias =
      masked_rows(position_->score_term(q, keys, {}, ctx.positions, layer_, begin, end, state), ctx, begin, end, K);
  return sdpa(q.narrow(2, begin, end - begin), keys, values, bias.to(q.scalar_type()), 0.0, false);
}

torch::Tensor AttentionImpl::attend_rows_with_terms(const torch::Tensor& q, const torch::Tensor& k,
                                                    const torch::Tensor& v, const AttentionContext& ctx,
                                                    const torch::Tensor& state, int64_t begin, int64_t end) {
  // Causal rows see no key after `end`: the family scores the keys [0, K) alone.
  const int64_t K = visible_keys(ctx, q.size(2), begin, end);
  const torch::Tensor keys = k.narrow(2, 0, K), values = v.narrow(2, 0, K);
  torch::Tensor scores = masked_rows(position_->content_scores(q, keys, ctx.positions, begin, end, state), ctx, begin,
                                     end, K);  // [B, H, C, K]
  // After the mask, so a term built from the scores (gates over them) sees hidden keys as -inf.
  if (position_->traits().forms_scores) {
    const torch::Tensor score_term = position_->score_term(q, keys, scores, ctx.positions, layer_, begin, end, state);
    if (score_term.defined()) scores = scores + score_term.to(scores.scalar_type());
  }
  const auto [weights, remainder] = normalise(scores, begin);
  const torch::Tensor probs =
      torch::dropout(weights, is_training() ? dropout_ : 0.0, is_training()).to(v.scalar_type());
  torch::Tensor out = at::matmul(probs, values);  // [B, H, C, D]
  if (remainder.defined())                        // stick-breaking's leftover weight on the query's own value
    out = out + remainder.unsqueeze(-1).to(v.scalar_type()) * v.narrow(2, begin, end - begin);
  const torch::Tensor output_term =
      position_->traits().forms_scores ? position_->output_term(probs, ctx.positions, layer_, begin) : torch::Tensor();
  return output_term.defined() ? out + output_term.to(out.scalar_type()) : out;
}

torch::Tensor AttentionImpl::attend_explicit(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                             const AttentionContext& ctx, const torch::Tensor& state) {
  record_kernel(attention_kernel::kExplicitScores);
  return in_query_blocks(
      q.size(2), ctx.score_block_rows > 0 ? ctx.score_block_rows : q.size(2),
      [&](int64_t begin, int64_t end) { return attend_rows_with_terms(q, k, v, ctx, state, begin, end); });
}

torch::Tensor AttentionImpl::attend_sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                         const AttentionContext& ctx) {
  const double p = is_training() ? dropout_ : 0.0;
  if (!ctx.mask.defined()) return sdpa(q, k, v, std::nullopt, p, ctx.causal);
  // Queries in blocks at long lengths, each with its own rows of the mask and, under a local
  // window, only the keys the window lets it see.
  return in_query_blocks(q.size(2), ctx.mask.block_rows(), [&](int64_t begin, int64_t end) {
    const auto [first, last] = ctx.mask.key_span(begin, end);
    const torch::Tensor reversed = first == 0 ? ctx.mask.reversed_rows(begin, end, last) : torch::Tensor();
    if (reversed.defined() && reversed.scalar_type() == q.scalar_type())  // the rows without a copy
      return sdpa(q.narrow(2, begin, end - begin).flip(2), k.narrow(2, 0, last), v.narrow(2, 0, last), reversed, p,
                  false)
          .flip(2);
    return sdpa_rows(q, k, v, ctx, begin, end);
  });
}

torch::Tensor AttentionImpl::sdpa_rows(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const AttentionContext& ctx, int64_t begin, int64_t end) {
  const double p = is_training() ? dropout_ : 0.0;
  const torch::Tensor rows_q = q.narrow(2, begin, end - begin);
  if (ctx.mask.defined()) {
    const auto [first, last] = ctx.mask.key_span(begin, end);
    const torch::Tensor rows = ctx.mask.rows(begin, end, last).narrow(-1, first, last - first);
    return sdpa(rows_q, k.narrow(2, first, last - first), v.narrow(2, first, last - first), rows.to(q.scalar_type()), p,
                false);
  }
  if (!ctx.causal) return sdpa(rows_q, k, v, std::nullopt, p, false);
  // The causal flag aligns a block's rows with the first keys; the block's own rows of -inf instead.
  const torch::Tensor rows = masked_rows(torch::zeros({1, 1, end - begin, end}, q.options()), ctx, begin, end, end);
  return sdpa(rows_q, k.narrow(2, 0, end), v.narrow(2, 0, end), rows, p, false);
}

torch::Tensor AttentionImpl::attend_rows_from(const torch::Tensor& x, const torch::Tensor& q, const torch::Tensor& k,
                                              const torch::Tensor& v, const AttentionContext& ctx, AttentionPath path,
                                              int64_t from) {
  const int64_t S = q.size(2);
  if (!forms_scores())  // the SDPA families: the rows with their own rows of the mask
    return in_query_blocks(
        S, ctx.mask.defined() ? ctx.mask.block_rows() : S,
        [&](int64_t begin, int64_t end) { return sdpa_rows(q, k, v, ctx, begin, end); }, from);
  const torch::Tensor state = position_->layer_state(x, k, ctx.positions, layer_, ctx.segments);
  if (path != AttentionPath::bias_to_sdpa) record_kernel(attention_kernel::kExplicitScores);  // SDPA records its own
  return in_query_blocks(
      S, ctx.score_block_rows > 0 ? ctx.score_block_rows : S,
      [&](int64_t begin, int64_t end) {
        return path == AttentionPath::bias_to_sdpa ? bias_rows_to_sdpa(q, k, v, ctx, state, begin, end)
                                                   : attend_rows_with_terms(q, k, v, ctx, state, begin, end);
      },
      from);
}

AttentionPassFacts AttentionImpl::pass_facts(const torch::Tensor& x, const AttentionContext& ctx) const {
  const PositionEncodingImpl::Traits& traits = position_->traits();
  AttentionPassFacts f;
  f.linear = kind_ == config::AttentionKind::linear;
  f.softmax = normalizer_ == config::AttentionNormalizer::softmax;
  f.forms_scores = forms_scores();
  f.family_blocks = traits.evaluates_in_blocks;
  if (traits.term) {
    f.term = *traits.term;
  } else if (f.forms_scores && !traits.forms_scores) {  // stick-breaking alone scores q.k
    f.term = ops::NoTerm::properties();
  }
  f.kernel = kernel_;
  const bool cpu_autocast = at::autocast::is_autocast_enabled(at::kCPU);  // q, k, v in the autocast dtype
  f.projection_not_fusable = cpu_autocast || ctx.query_scale.defined() || ctx.ssmax_log_keys.defined() || q_norm ||
                             key_shift || kv_heads_ != heads_ || query_factor_ != 1.0 ||
                             !position_->rotation_fusable(ctx.positions, head_dim_);
  f.batch = x.size(0);
  f.heads = heads_;
  f.seq = x.size(1);
  f.head_dim = head_dim_;
  f.element_size = static_cast<int64_t>(x.element_size());
  f.short_shape = !cpu_autocast && ops::short_attention_shape_supported(f.seq, head_dim_, x.scalar_type(), x.device());
  f.tile_shape = !cpu_autocast && ops::tile_attention_shape_supported(head_dim_, x.scalar_type(), x.device());
  const bool cuda_autocast = at::autocast::is_autocast_enabled(at::kCUDA);  // q, k, v in its dtype
  f.cuda_tile_shape = ops::tile_attention_cuda_shape_supported(
      head_dim_, cuda_autocast ? at::autocast::get_autocast_dtype(at::kCUDA) : x.scalar_type(), x.device());
  f.autograd = torch::GradMode::is_enabled();
  f.training = is_training();
  f.dropout = is_training() ? dropout_ : 0.0;
  f.causal = ctx.causal;
  f.mask_beyond_causality = ctx.mask.defined() && !ctx.mask.nothing_beyond_causality();
  f.relative_bias_alone = ctx.mask.defined() && ctx.mask.only_relative_bias();
  f.relative_bias_padded = ctx.mask.defined() && ctx.mask.relative_bias_and_right_padding();
  f.relative_bias_learned = f.relative_bias_alone && f.autograd && ctx.mask.relative_bias().requires_grad();
  f.right_padding_at_most = !ctx.mask.defined() || ctx.mask.right_padding_at_most();
  f.right_padding = ctx.mask.defined() && ctx.mask.key_lengths().defined();
  f.shared_positions = ctx.positions.dim() == 1;
  f.documents_alone = ctx.mask.defined() && ctx.mask.documents_alone() && ctx.segments.defined() &&
                      ctx.positions.dim() == 2 && x.device().is_cpu() && !traits.reads_pass_length;
  return f;
}

AttentionPlan AttentionImpl::plan(const torch::Tensor& x, const AttentionContext& ctx) {
  AttentionPlan chosen = plan_attention(pass_facts(x, ctx));
  if (chosen.path != last_path_) {  // logged once per layer and path, not per step
    log::debug("attention layer ", layer_, ": ", attention_path_name(chosen.path), " (", chosen.why, chosen.detail,
               ")");
    last_path_ = chosen.path;
  }
  return chosen;
}

bool AttentionImpl::folds_key_bias(const AttentionContext& ctx, const torch::Tensor& q) const {
  // Training only (evaluation keeps the tile kernel's c_i - c_j), never under the reference
  // kernel, in float32/64 only (half precision would round the bias riding in a key feature).
  return position_->traits().causal_key_bias && ctx.causal && is_training() &&
         normalizer_ == config::AttentionNormalizer::softmax && kernel_ != config::AttentionKernel::reference &&
         (q.scalar_type() == torch::kFloat32 || q.scalar_type() == torch::kFloat64);
}

torch::Tensor AttentionImpl::attend_with_key_bias(const torch::Tensor& x, const torch::Tensor& q,
                                                  const torch::Tensor& k, const torch::Tensor& v,
                                                  const AttentionContext& ctx, int64_t rows_from) {
  const int64_t B = q.size(0), H = q.size(1), S = q.size(2), D = q.size(3), E = D + 8;  // kernels take multiples of 8
  const double scale = position_->score_scale(D), a = scale * std::sqrt(static_cast<double>(E));
  const torch::Tensor bias = position_->key_bias(position_->layer_state(x, k, ctx.positions, layer_, ctx.segments));
  // q2 . k2 / sqrt(E) = q . k scale + bias_j: the queries times a with a after them, the keys with
  // bias / scale after them, zeros to E; the values with zeros, cut off the output.
  const torch::Tensor pad = torch::zeros({B, H, S, E - D - 1}, q.options());
  const torch::Tensor q2 = torch::cat({q * a, torch::full({B, H, S, 1}, a, q.options()), pad}, -1);
  const torch::Tensor k2 = torch::cat({k, (bias / scale).to(k.scalar_type()).unsqueeze(-1), pad}, -1);
  const torch::Tensor v2 = torch::cat({v, torch::zeros({B, H, S, E - D}, v.options())}, -1);
  AttentionContext plain = ctx;  // a mask of causality alone is the causal flag for these kernels
  if (ctx.mask.defined() && ctx.mask.nothing_beyond_causality()) plain.mask = AttentionMask();
  if (rows_from > 0)
    return in_query_blocks(
               S, plain.mask.defined() ? plain.mask.block_rows() : S,
               [&](int64_t begin, int64_t end) { return sdpa_rows(q2, k2, v2, plain, begin, end); }, rows_from)
        .narrow(-1, 0, D);
  AttentionPassFacts f = pass_facts(x, plain);  // the plan of a family without a term at head dim E
  f.forms_scores = false;
  f.term.reset();
  f.head_dim = E;
  f.projection_not_fusable = true;
  f.short_shape = ops::short_attention_shape_supported(S, E, q.scalar_type(), q.device());
  if (plan_attention(f).path == AttentionPath::short_kernel) {
    record_kernel(attention_kernel::kShort);
    return ops::short_attention(q2, k2, v2, true).narrow(-1, 0, D);
  }
  return attend_sdpa(q2, k2, v2, plain).narrow(-1, 0, D);
}

torch::Tensor AttentionImpl::attend_heads(const torch::Tensor& x, const AttentionContext& ctx, int64_t rows_from) {
  const int64_t B = x.size(0), S = x.size(1), width = heads_ * head_dim_;
  const AttentionPath path = plan(x, ctx).path;
  // One projection for q, k and v: one matmul (one input cast under autocast, one input
  // gradient in backward) instead of three; the parameters stay three Linears (HF names).
  const torch::Tensor w = torch::cat({self->query->weight, self->key->weight, self->value->weight});
  const torch::Tensor b = self->query->bias.defined()
                              ? torch::cat({self->query->bias, self->key->bias, self->value->bias})
                              : torch::Tensor();  // model.qkv_bias false
  if (path == AttentionPath::short_projection && rows_from == 0) {
    const PositionEncodingImpl::FusedRotation rotation =
        position_->fused_rotation(ctx.positions, head_dim_, x.scalar_type());
    record_kernel(attention_kernel::kShort);
    const bool relative = ctx.mask.defined() && ctx.mask.only_relative_bias();  // ALiBi, T5, KERPLE, Sandwich
    return ops::short_attention_qkv(at::linear(x, w), b, heads_, ctx.causal, rotation.tables, rotation.interleaved,
                                    relative ? ctx.mask.relative_bias() : torch::Tensor());
  }
  const int64_t kv_width = kv_heads_ * head_dim_;
  const std::vector<torch::Tensor> qkv = at::linear(x, w, b).split_with_sizes({width, kv_width, kv_width}, -1);
  auto split_heads = [&](const torch::Tensor& t, int64_t heads) {
    return t.view({B, S, heads, head_dim_}).transpose(1, 2);
  };
  torch::Tensor q = split_heads(qkv[0], heads_);  // [B, H, S, D] views of the projection, no copies
  torch::Tensor k = split_heads(qkv[1], kv_heads_);
  torch::Tensor v = split_heads(qkv[2], kv_heads_);
  if (key_shift) {
    k = shifted_by_token(k, key_shift, x);
    v = shifted_by_token(v, value_shift, x);
  }
  if (q_norm) {  // before the rotation, as the FoX authors' layer and Llama 4 do
    q = q_norm->forward(q);
    k = k_norm->forward(k);
  }
  if (kv_heads_ != heads_) {  // grouped-query attention: query head h reads key/value head h / group
    k = k.repeat_interleave(heads_ / kv_heads_, /*dim=*/1);
    v = v.repeat_interleave(heads_ / kv_heads_, /*dim=*/1);
  }
  if (path == AttentionPath::linear) return attend_linear(q, k, v, ctx).narrow(2, rows_from, S - rows_from);
  position_->rotate(q, k, v, ctx.positions);
  if (query_factor_ != 1.0) q = q * query_factor_;                             // model.score_scale_dim
  if (ctx.query_scale.defined()) q = q * ctx.query_scale.to(q.scalar_type());  // log-n: [1|B, 1, S, 1]
  if (ctx.ssmax_log_keys.defined())                                            // SSMax: s_h log n
    q = q * (ssmax_scale.view({1, heads_, 1, 1}) * ctx.ssmax_log_keys).to(q.scalar_type());
  if (folds_key_bias(ctx, q)) return attend_with_key_bias(x, q, k, v, ctx, rows_from);
  // The whole-pass kernels (tiles, the short kernel with a term) rather than explicit rows for
  // more than a quarter of the queries.
  const bool whole_only =
      path == AttentionPath::short_with_term || path == AttentionPath::tiles || path == AttentionPath::bias_tiles;
  if (rows_from > 0 && !(whole_only && 4 * (S - rows_from) > S))
    return attend_rows_from(x, q, k, v, ctx, path, rows_from);
  switch (path) {
    case AttentionPath::short_kernel:
      record_kernel(attention_kernel::kShort);
      return ops::short_attention(q, k, v, ctx.causal);
    case AttentionPath::short_with_bias:
      record_kernel(attention_kernel::kShort);
      return ops::short_attention_bias(q, k, v, ctx.mask.relative_bias(), ctx.causal);
    case AttentionPath::sdpa:
      return attend_sdpa(q, k, v, ctx);
    case AttentionPath::bias_tiles:
      record_kernel(attention_kernel::kTile);
      return ops::tile_attention_bias(q, k, v, 1.0 / std::sqrt(static_cast<double>(head_dim_)), ctx.causal,
                                      ctx.mask.relative_bias(), ctx.mask.key_lengths())
          .narrow(2, rows_from, S - rows_from);
    default:
      break;
  }
  if (path == AttentionPath::tiles && ctx.segments.defined())
    return attend_documents_in_tiles(x, q, k, v, ctx).narrow(2, rows_from, S - rows_from);
  const torch::Tensor state = position_->layer_state(x, k, ctx.positions, layer_, ctx.segments);
  switch (path) {
    case AttentionPath::short_with_term:
      return attend_short_with_term(q, k, v, ctx, state).narrow(2, rows_from, S - rows_from);
    case AttentionPath::tiles:
      return attend_in_tiles(q, k, v, ctx, state).narrow(2, rows_from, S - rows_from);
    case AttentionPath::family_blocks:
      record_kernel(attention_kernel::kTile);
      return position_->evaluate_in_blocks(q, k, v, state, position_->score_scale(head_dim_));
    case AttentionPath::bias_to_sdpa:  // SDPA records its backend
      return in_query_blocks(S, ctx.score_block_rows > 0 ? ctx.score_block_rows : S, [&](int64_t begin, int64_t end) {
        return bias_rows_to_sdpa(q, k, v, ctx, state, begin, end);
      });
    default:
      return attend_explicit(q, k, v, ctx, state);
  }
}

torch::Tensor AttentionImpl::attend(const torch::Tensor& x, const AttentionContext& ctx, int64_t rows_from) {
  const int64_t B = x.size(0), T = x.size(1) - rows_from, width = heads_ * head_dim_;
  TORCH_CHECK(rows_from >= 0 && T > 0, "attention: rows_from ", rows_from, " outside [0, ", x.size(1), ")");
  torch::Tensor heads = attend_heads(x, ctx, rows_from);  // [B, H, T, D]
  if (output_norm) heads = output_norm->forward(heads);
  torch::Tensor merged = heads.transpose(1, 2).reshape({B, T, width});
  if (output_gate) merged = merged * torch::sigmoid(dense(output_gate, x.narrow(1, rows_from, T)));
  return dense(output->dense, merged);
}

}  // namespace roformer::model
