// Tile attention: argument checks, k transposed and padded for the kernel's products, the term's
// tables (FIRE: each distance's logarithm, each row's denominator and where its segments change,
// rounded as ops::fire_bias rounds them) and the launch.
#include "roformer/ops/tile_attention/tile_attention.h"

#include <ATen/ATen.h>

#include <cmath>
#include <vector>

#include "roformer/ops/common/kernel_dtype_torch.h"
#include "roformer/ops/tile_attention/tile_attention_kernels.h"

namespace roformer::ops {
// Named, not anonymous: in a unity batch an anonymous namespace merges with its neighbours' (fire_bias.cpp
// has a psi too).
namespace tile_attention_setup {

constexpr int64_t kMaxHeadDim = 512;

// psi(x) = log(|c x| + 1) in T, as LibTorch rounds it.
template <typename T>
T psi(T c, T x) {
  return std::log1p(std::abs(c * x));
}

// FIRE's tables for positions 0..S-1: psi [S], denominator [S], and bounds [S, W], per query row
// the first distance d whose x = psi[d] / denominator passes each kink (S where none does). A
// row's x only falls as the row grows (its denominator grows), so each kink's bound only moves
// forward from row to row: O(S W) in all.
template <typename T>
void fire_tables(const TileTerm& t, int64_t S, at::Tensor& table, at::Tensor& denominator, at::Tensor& bounds) {
  const T c = static_cast<T>(t.fire_c), threshold = static_cast<T>(t.fire_threshold), eps = static_cast<T>(t.fire_eps);
  const at::Tensor kinks_t = t.fire_kinks.to(table.scalar_type()).contiguous();
  const T* kinks = kinks_t.data_ptr<T>();
  const int64_t W = kinks_t.size(0);
  T* psi_d = table.data_ptr<T>();
  T* den = denominator.data_ptr<T>();
  int64_t* bound = bounds.data_ptr<int64_t>();
  for (int64_t d = 0; d < S; ++d) psi_d[d] = psi(c, static_cast<T>(d));
  for (int64_t i = 0; i < S; ++i) den[i] = psi(c, std::max(static_cast<T>(i), threshold)) + eps;
  std::vector<int64_t> at(W, 0);
  for (int64_t i = 0; i < S; ++i) {
    for (int64_t w = 0; w < W; ++w) {
      int64_t d = std::max(at[w], w > 0 ? at[w - 1] : int64_t{0});
      while (d < S && !(kinks[w] < psi_d[d] / den[i])) ++d;
      at[w] = d;
      bound[i * W + w] = d;
    }
  }
}

// k [B, H, S, D] as the kernel reads keys: [B, H, D, ld] contiguous, zero past S.
at::Tensor transposed_keys(const at::Tensor& k, int64_t ld) {
  at::Tensor kt = at::zeros({k.size(0), k.size(1), k.size(3), ld}, k.options());
  kt.narrow(3, 0, k.size(2)).copy_(k.transpose(2, 3));
  return kt;
}

// The first distance from which neither bucket index changes (S - 1 at most).
int64_t constant_from(const at::Tensor& query_bucket, const at::Tensor& key_bucket) {
  const int64_t* qb = query_bucket.data_ptr<int64_t>();
  const int64_t* kb = key_bucket.data_ptr<int64_t>();
  int64_t from = query_bucket.numel() - 1;
  while (from > 0 && qb[from - 1] == qb[from] && kb[from - 1] == kb[from]) --from;
  return std::max<int64_t>(from, 0);
}

void check_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, const TileTerm& term) {
  TORCH_CHECK(tile_attention_supports(q, k, v),
              "roformer::tile_attention: q, k, v must be [B, H, S, D] CPU tensors of one dtype (float32 or float64), "
              "equal shapes, q and v with unit stride along D, D a multiple of 8 up to ",
              kMaxHeadDim, "; got ", q.sizes(), " ", q.scalar_type(), ", ", k.sizes(), ", ", v.sizes());
  TORCH_CHECK(!(at::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad())),
              "roformer::tile_attention: no gradient (evaluation only); run it under NoGradGuard");
  TORCH_CHECK(term.kind == TileTerm::Kind::none || causal,
              "roformer::tile_attention: the FIRE, CoPE, FoX, relative, bucket and PaTH terms are causal");
  if (term.kind == TileTerm::Kind::fire)
    TORCH_CHECK(term.fire_kinks.dim() == 1 && term.fire_slope.dim() == 2 &&
                    term.fire_slope.sizes() == term.fire_intercept.sizes() && term.fire_slope.size(0) == q.size(1) &&
                    term.fire_slope.size(1) == term.fire_kinks.size(0) + 1,
                "roformer::tile_attention: FIRE needs kinks [W] and slope, intercept [H, W + 1] for H = ", q.size(1),
                ", got ", term.fire_kinks.sizes(), ", ", term.fire_slope.sizes(), ", ", term.fire_intercept.sizes());
  if (term.kind == TileTerm::Kind::cope)
    TORCH_CHECK(term.cope_at_integers.dim() == 4 && term.cope_at_integers.size(-1) >= 1 &&
                    term.cope_at_integers.sizes().slice(0, 3) == q.sizes().slice(0, 3),
                "roformer::tile_attention: CoPE needs q . e [B, H, S, P] for q ", q.sizes(), ", got ",
                term.cope_at_integers.sizes());
  if (term.far_q.defined() || term.far_k.defined())
    TORCH_CHECK(causal && tile_attention_supports(term.far_q, term.far_k, v) && !std::isnan(term.far_threshold),
                "roformer::tile_attention: two rotations need causal attention, far_q and far_k like q, and a "
                "threshold; got ",
                term.far_q.defined() ? term.far_q.sizes() : at::IntArrayRef{}, ", ",
                term.far_k.defined() ? term.far_k.sizes() : at::IntArrayRef{});
  if (term.kind == TileTerm::Kind::relative)
    TORCH_CHECK(term.relative_q.defined() && term.relative_q.sizes() == q.sizes() &&
                    term.relative_q.scalar_type() == q.scalar_type() && term.relative_q.stride(3) == 1 &&
                    term.relative_table.dim() == 3 && term.relative_table.size(0) == q.size(1) &&
                    term.relative_table.size(1) >= q.size(2) && term.relative_table.size(2) == q.size(3),
                "roformer::tile_attention: a relative table needs relative_q like q and a table [H, >= S, D] for q ",
                q.sizes(), ", got ", term.relative_q.defined() ? term.relative_q.sizes() : at::IntArrayRef{}, " and ",
                term.relative_table.defined() ? term.relative_table.sizes() : at::IntArrayRef{});
  if (term.kind == TileTerm::Kind::buckets) {
    const bool shaped = term.by_query.defined() && term.by_key.defined() && term.query_bucket.defined() &&
                        term.key_bucket.defined() && term.by_query.dim() == 4 &&
                        term.by_query.sizes().slice(0, 3) == q.sizes().slice(0, 3) && term.by_key.dim() == 4 &&
                        term.by_key.size(0) == q.size(0) && term.by_key.size(1) == q.size(1) &&
                        term.by_key.size(2) == term.by_query.size(3) && term.by_key.size(3) == q.size(2);
    TORCH_CHECK(shaped && term.query_bucket.numel() == q.size(2) && term.key_bucket.numel() == q.size(2),
                "roformer::tile_attention: buckets need by_query [B, H, S, R], by_key [B, H, R, S] and two bucket "
                "indices [S] for q ",
                q.sizes());
    const int64_t R = term.by_query.size(3);
    for (const at::Tensor& b : {term.query_bucket, term.key_bucket})
      TORCH_CHECK(b.numel() == 0 || (b.min().item<int64_t>() >= 0 && b.max().item<int64_t>() < R),
                  "roformer::tile_attention: bucket indices must lie in [0, ", R, ")");
  }
  if (term.kind == TileTerm::Kind::path)
    TORCH_CHECK(
        term.path_state.dim() == 4 && term.path_state.sizes().slice(0, 3) == q.sizes().slice(0, 3) &&
            term.path_state.size(3) == q.size(3) + 2 && !term.q.defined() && !term.far_q.defined() && term.chunk == 0,
        "roformer::tile_attention: PaTH needs its state [B, H, S, D + 2] for q ", q.sizes(), ", got ",
        term.path_state.defined() ? term.path_state.sizes() : at::IntArrayRef{}, ", and no other queries or rotations");
  if (term.kind == TileTerm::Kind::fox)
    TORCH_CHECK(term.fox_cumulative.dim() == 3 && term.fox_cumulative.sizes() == q.sizes().slice(0, 3),
                "roformer::tile_attention: FoX needs the gates' running sums [B, H, S] for q ", q.sizes(), ", got ",
                term.fox_cumulative.sizes());
}

// `t` in q's dtype and contiguous, kept alive in `keep`; its data.
const void* kept(const at::Tensor& t, const at::Tensor& q, std::vector<at::Tensor>& keep) {
  keep.push_back(t.to(q.scalar_type()).contiguous());
  return keep.back().data_ptr();
}

void describe_fire(const TileTerm& term, const at::Tensor& q, TileAttentionLaunch& p, std::vector<at::Tensor>& keep) {
  const int64_t S = p.seq;
  at::Tensor psi_table = at::empty({S}, q.options()), denominator = at::empty({S}, q.options());
  at::Tensor bounds = at::empty({S, term.fire_kinks.size(0)}, q.options().dtype(at::kLong));
  if (q.scalar_type() == at::kDouble) {
    fire_tables<double>(term, S, psi_table, denominator, bounds);
  } else {
    fire_tables<float>(term, S, psi_table, denominator, bounds);
  }
  keep.insert(keep.end(), {psi_table, denominator, bounds});
  p.fire_psi = psi_table.data_ptr();
  p.fire_denominator = denominator.data_ptr();
  p.fire_bounds = bounds.data_ptr<int64_t>();
  p.fire_kinks = term.fire_kinks.size(0);
  p.fire_slope = kept(term.fire_slope, q, keep);
  p.fire_intercept = kept(term.fire_intercept, q, keep);
}

void describe_relative(const TileTerm& term, const at::Tensor& q, TileAttentionLaunch& p,
                       std::vector<at::Tensor>& keep) {
  const int64_t H = p.heads, S = p.seq, D = p.head_dim;
  p.relative_q = term.relative_q.data_ptr();
  for (int a = 0; a < 3; ++a) p.relative_q_stride[a] = term.relative_q.stride(a);
  p.relative_table_ld = (S + 15) / 8 * 8;  // >= S + 8
  at::Tensor table_t = at::zeros({H, D, p.relative_table_ld}, q.options());
  table_t.narrow(2, 0, S).copy_(term.relative_table.narrow(1, 0, S).transpose(1, 2));
  keep.push_back(table_t);
  p.relative_table_t = table_t.data_ptr();
  if (!term.relative_value_table.defined()) return;
  TORCH_CHECK(term.relative_value_table.dim() == 3 && term.relative_value_table.size(0) == H &&
                  term.relative_value_table.size(1) >= S && term.relative_value_table.size(2) == D,
              "roformer::tile_attention: a relative value table must be [H, >= S, D] for q ", q.sizes(), ", got ",
              term.relative_value_table.sizes());
  at::Tensor values = term.relative_value_table.to(q.scalar_type());
  if (values.stride(2) != 1 || values.stride(1) != D) values = values.contiguous();  // heads may share rows
  keep.push_back(values);
  p.relative_value = values.data_ptr();
  p.relative_value_head_stride = values.stride(0);
}

void describe_buckets(const TileTerm& term, const at::Tensor& q, TileAttentionLaunch& p,
                      std::vector<at::Tensor>& keep) {
  p.by_query = kept(term.by_query, q, keep);
  p.by_key = kept(term.by_key, q, keep);
  const at::Tensor query_bucket = term.query_bucket.to(at::kLong).contiguous();
  const at::Tensor key_bucket = term.key_bucket.to(at::kLong).contiguous();
  keep.insert(keep.end(), {query_bucket, key_bucket});
  p.query_bucket = query_bucket.data_ptr<int64_t>();
  p.key_bucket = key_bucket.data_ptr<int64_t>();
  p.buckets = term.by_query.size(3);
  p.buckets_constant_from = constant_from(query_bucket, key_bucket);
}

// The term's tables into the launch (each kept alive in `keep`).
void describe_term(const TileTerm& term, const at::Tensor& q, TileAttentionLaunch& p, std::vector<at::Tensor>& keep) {
  switch (term.kind) {
    case TileTerm::Kind::none:
      return;
    case TileTerm::Kind::fire:
      p.term = TileTermKind::fire;
      return describe_fire(term, q, p, keep);
    case TileTerm::Kind::cope:
      p.term = TileTermKind::cope;
      p.cope_at_integers = kept(term.cope_at_integers, q, keep);
      p.cope_positions = term.cope_at_integers.size(-1);
      return;
    case TileTerm::Kind::fox:
      p.term = TileTermKind::fox;
      p.fox_cumulative = kept(term.fox_cumulative, q, keep);
      return;
    case TileTerm::Kind::relative:
      p.term = TileTermKind::relative;
      return describe_relative(term, q, p, keep);
    case TileTerm::Kind::buckets:
      p.term = TileTermKind::buckets;
      return describe_buckets(term, q, p, keep);
    case TileTerm::Kind::path:
      p.term = TileTermKind::path;
      p.path_state = kept(term.path_state, q, keep);
      p.path_forget_gate = term.path_forget_gate;
      return;
  }
}

// key_lengths as the kernel reads them: int64 [B] contiguous, each in [1, S].
at::Tensor checked_key_lengths(const at::Tensor& key_lengths, const at::Tensor& q, const TileTerm& term) {
  TORCH_CHECK(term.kind != TileTerm::Kind::path,
              "roformer::tile_attention: PaTH takes no key lengths (its walk passes every position)");
  const at::Tensor lengths = key_lengths.to(at::kCPU, at::kLong).contiguous();
  TORCH_CHECK(lengths.dim() == 1 && lengths.size(0) == q.size(0),
              "roformer::tile_attention: key lengths must be [B] for q ", q.sizes(), ", got ", key_lengths.sizes());
  TORCH_CHECK(
      lengths.numel() == 0 || (lengths.min().item<int64_t>() >= 1 && lengths.max().item<int64_t>() <= q.size(2)),
      "roformer::tile_attention: key lengths must lie in [1, ", q.size(2), "]");
  return lengths;
}

}  // namespace tile_attention_setup

TileTermProperties tile_term_properties(TileTerm::Kind kind) {
  TileTermProperties p;
  switch (kind) {
    case TileTerm::Kind::fire:  // a function of the distance and the query's position
      p.positions_only = true;
      break;
    case TileTerm::Kind::cope:
      p.short_kernel = true;
      break;
    case TileTerm::Kind::path:  // its tiles train slower than its explicit scores (docs/performance.md)
      p.key_lengths = false;
      p.trains_faster_in_tiles = false;
      break;
    case TileTerm::Kind::none:
    case TileTerm::Kind::fox:
    case TileTerm::Kind::relative:
    case TileTerm::Kind::buckets:
      break;
  }
  return p;
}

bool tile_attention_shape_supported(int64_t head_dim, torch::ScalarType dtype, const torch::Device& device) {
  return device.is_cpu() && (dtype == at::kFloat || dtype == at::kDouble) && head_dim > 0 && head_dim % 8 == 0 &&
         head_dim <= tile_attention_setup::kMaxHeadDim;
}

bool tile_attention_supports(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  if (!q.defined() || !k.defined() || !v.defined() || q.dim() != 4) return false;
  if (!q.is_cpu() || !k.is_cpu() || !v.is_cpu()) return false;
  const auto dt = q.scalar_type();
  if ((dt != at::kFloat && dt != at::kDouble) || k.scalar_type() != dt || v.scalar_type() != dt) return false;
  if (k.sizes() != q.sizes() || v.sizes() != q.sizes()) return false;
  const int64_t D = q.size(3);
  return D > 0 && D % 8 == 0 && D <= tile_attention_setup::kMaxHeadDim && q.stride(3) == 1 && v.stride(3) == 1;
}

torch::Tensor tile_attention(const torch::Tensor& q_in, const torch::Tensor& k_in, const torch::Tensor& v, double scale,
                             bool causal, const TileTerm& term, TileNormalizer normalizer,
                             const torch::Tensor& key_lengths) {
  const at::Tensor& q = term.q.defined() ? term.q : q_in;
  const at::Tensor& k = term.k.defined() ? term.k : k_in;
  tile_attention_setup::check_inputs(q, k, v, causal, term);
  TORCH_CHECK(normalizer == TileNormalizer::softmax || causal, "roformer::tile_attention: stick-breaking is causal");
  const int64_t B = q.size(0), H = q.size(1), S = q.size(2), D = q.size(3);
  at::Tensor out = at::empty({B, S, H, D}, q.options()).transpose(1, 2);
  if (q.numel() == 0) return out;
  TileAttentionLaunch p;
  p.batch = B;
  p.heads = H;
  p.seq = S;
  p.head_dim = D;
  p.causal = causal;
  p.normalizer = static_cast<int>(normalizer);
  p.dtype = to_kernel_dtype(q.scalar_type(), "roformer::tile_attention");
  p.scale = scale * term.score_factor;
  p.kt_ld = (S + 7) / 8 * 8;
  std::vector<at::Tensor> keep{
      tile_attention_setup::transposed_keys(k, p.kt_ld)};  // what the kernel reads, alive until it returns
  p.q = q.data_ptr();
  p.kt = keep[0].data_ptr();
  p.v = v.data_ptr();
  p.out = out.data_ptr();
  for (int a = 0; a < 3; ++a) {
    p.q_stride[a] = q.stride(a);
    p.v_stride[a] = v.stride(a);
    p.out_stride[a] = out.stride(a);
  }
  if (term.chunk > 0) {
    TORCH_CHECK(
        causal && tile_attention_supports(term.far_q, term.far_k, v) && tile_attention_supports(term.mid_q, k, v),
        "roformer::tile_attention: chunks need causal attention and mid_q, far_q, far_k like q");
    keep.push_back(tile_attention_setup::transposed_keys(term.far_k, p.kt_ld));
    p.far_kt = keep.back().data_ptr();
    p.far_q = term.far_q.data_ptr();
    p.mid_q = term.mid_q.data_ptr();
    for (int a = 0; a < 3; ++a) {
      p.far_q_stride[a] = term.far_q.stride(a);
      p.mid_q_stride[a] = term.mid_q.stride(a);
    }
    p.chunk = term.chunk;
  } else if (term.far_q.defined() && term.far_threshold < static_cast<double>(S)) {  // else no pair is far
    keep.push_back(tile_attention_setup::transposed_keys(term.far_k, p.kt_ld));
    p.far_q = term.far_q.data_ptr();
    for (int a = 0; a < 3; ++a) p.far_q_stride[a] = term.far_q.stride(a);
    p.far_kt = keep.back().data_ptr();
    p.far_from = static_cast<int64_t>(std::ceil(std::max(term.far_threshold, 0.0)));  // d >= t for whole d
  }
  tile_attention_setup::describe_term(term, q, p, keep);
  if (key_lengths.defined()) {
    keep.push_back(tile_attention_setup::checked_key_lengths(key_lengths, q, term));
    p.key_lengths = keep.back().data_ptr<int64_t>();
  }
  tile_attention_cpu(p);
  return out;
}

}  // namespace roformer::ops
