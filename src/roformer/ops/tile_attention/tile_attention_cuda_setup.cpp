// Tile attention on CUDA tensors: argument checks, the launch description with the term's tables
// in the accumulation dtype on the tensors' device (tile_attention_cuda_setup.h), and the launch
// (tile_attention_cuda_launch.h). Evaluation only; a build without our CUDA kernels says so.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "roformer/ops/common/kernel_dtype_torch.h"
#include "roformer/ops/tile_attention/tile_attention.h"
#include "roformer/ops/tile_attention/tile_attention_cuda_launch.h"
#include "roformer/ops/tile_attention/tile_attention_cuda_setup.h"

#ifdef ROFORMER_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace roformer::ops {
namespace tile_attention_cuda_setup {

// Whether the GPU build has a kernel for the dtype and head dimension (tile_cuda_builds), on a
// device that runs it: float32 anywhere, bfloat16 from compute capability 8.0 (tensor cores).
bool built_for_device(int64_t head_dim, torch::ScalarType dtype, const torch::Device& device) {
  if (dtype != at::kFloat && dtype != at::kBFloat16) return false;
  if (!tile_cuda_builds(head_dim, dtype == at::kFloat ? KernelDType::f32 : KernelDType::bf16)) return false;
  if (dtype == at::kFloat) return true;
#ifdef ROFORMER_WITH_CUDA
  return at::cuda::getDeviceProperties(device.index() < 0 ? at::cuda::current_device() : device.index())->major >= 8;
#else
  return false;
#endif
}

void check_tensors(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  TORCH_CHECK(tile_attention_cuda_supports(q, k, v),
              "roformer::tile_attention on CUDA: q, k, v must be [B, H, S, D] CUDA tensors on one device, of one "
              "dtype (float32, or bfloat16 on compute capability 8.0+), equal shapes, unit stride "
              "along D, D 64 or 128; got ",
              q.sizes(), " ", q.scalar_type(), " on ", q.device(), ", ", k.sizes(), ", ", v.sizes());
  TORCH_CHECK(!(at::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad())),
              "roformer::tile_attention on CUDA: no gradient (evaluation only); run it under NoGradGuard");
}

// The launch of q, k, v and out (the term left to the caller).
TileCudaLaunch describe(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
                        double scale, bool causal) {
  TileCudaLaunch p;
  p.batch = q.size(0), p.heads = q.size(1), p.seq = q.size(2), p.head_dim = q.size(3);
  p.causal = causal;
  p.dtype = to_kernel_dtype(q.scalar_type(), "roformer::tile_attention");
  p.scale = scale;
  p.q = q.data_ptr(), p.k = k.data_ptr(), p.v = v.data_ptr(), p.out = out.data_ptr();
  for (int a = 0; a < 3; ++a) {
    p.q_stride[a] = q.stride(a), p.k_stride[a] = k.stride(a), p.v_stride[a] = v.stride(a);
    p.out_stride[a] = out.stride(a);
  }
  return p;
}

void run(const TileCudaLaunch& p, const at::Device& device) {
#ifdef ROFORMER_WITH_CUDA
  const c10::cuda::CUDAGuard guard(device);
  tile_attention_cuda(p, at::cuda::getCurrentCUDAStream(device.index()).stream());
#else
  TORCH_CHECK(false, "roformer::tile_attention: this build has no CUDA kernels (", device, ")");
#endif
}

// Right padding as key lengths [B] (undefined: none) into the launch, on q's device.
void describe_key_lengths(const at::Tensor& key_lengths, const at::Tensor& q, TileCudaLaunch& p,
                          std::vector<at::Tensor>& keep) {
  if (!key_lengths.defined()) return;
  TORCH_CHECK(key_lengths.dim() == 1 && key_lengths.size(0) == q.size(0),
              "roformer::tile_attention: key lengths must be [B] for q ", q.sizes(), ", got ", key_lengths.sizes());
  keep.push_back(key_lengths.to(q.device(), at::kLong).contiguous());
  p.key_lengths = keep.back().data_ptr<int64_t>();
}

// q's dtype's accumulation type: float64 for float64, else float32.
at::ScalarType accumulation(const at::Tensor& q) {
  return q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

// FIRE's tables on the device in the accumulation dtype, kept alive in `keep`: psi(d) for d in
// [0, S), and per side each row's denominator psi(max(reach, threshold)) + eps (reach: i, or
// S - 1 - i for the keys after it), its kinks, slopes and intercepts. A row's segment is found
// from x by bisection in the kernel; the map is continuous at the kinks, so x rounded an ulp
// apart picks either side of one at no cost.
TileCudaFire fire_tables(const FireTerm& t, const at::Tensor& q, bool causal, std::vector<at::Tensor>& keep) {
  const int64_t H = q.size(1), S = q.size(2);
  const at::TensorOptions options = q.options().dtype(accumulation(q));
  auto psi = [&](const at::Tensor& x) { return at::log1p((x * t.c).abs()); };
  const at::Tensor positions = at::arange(S, options);
  auto side = [&](const at::Tensor& kinks, const at::Tensor& slope, const at::Tensor& intercept, bool future) {
    TORCH_CHECK(kinks.defined() && slope.defined() && intercept.defined() && kinks.dim() == 1 &&
                    slope.sizes() == intercept.sizes() && slope.dim() == 2 && slope.size(0) == H &&
                    slope.size(1) == kinks.size(0) + 1,
                "roformer::tile_attention: FIRE's ", future ? "future (bidirectional)" : "past",
                " side needs kinks [W] and slope, intercept [H, W + 1] for H = ", H);
    const at::Tensor reach = future ? (S - 1) - positions : positions;
    keep.push_back(psi(reach.clamp_min(t.threshold)) + t.eps);
    TileCudaFireSide s;
    s.denominator = keep.back().data_ptr();
    keep.push_back(kinks.to(options).contiguous());
    s.kinks = keep.back().data_ptr();
    s.kink_count = kinks.size(0);
    keep.push_back(slope.to(options).contiguous());
    s.slope = keep.back().data_ptr();
    keep.push_back(intercept.to(options).contiguous());
    s.intercept = keep.back().data_ptr();
    return s;
  };
  TileCudaFire fire;
  keep.push_back(psi(positions));
  fire.psi = keep.back().data_ptr();
  fire.past = side(t.kinks, t.slope, t.intercept, false);
  if (!causal) fire.future = side(t.future_kinks, t.future_slope, t.future_intercept, true);
  return fire;
}

// DeBERTa's bucketed tables on the device in the accumulation dtype (checked as the CPU kernel
// checks them), kept alive in `keep`.
TileCudaBuckets bucket_tables(const BucketTerm& t, const at::Tensor& q, bool causal, std::vector<at::Tensor>& keep) {
  const int64_t B = q.size(0), H = q.size(1), S = q.size(2);
  const bool shaped = t.by_query.defined() && t.by_key.defined() && t.query_bucket.defined() &&
                      t.key_bucket.defined() && t.by_query.dim() == 4 && t.by_key.dim() == 4 &&
                      t.by_query.sizes().slice(0, 3) == q.sizes().slice(0, 3) && t.by_key.size(0) == B &&
                      t.by_key.size(1) == H && t.by_key.size(2) == t.by_query.size(3) && t.by_key.size(3) == S &&
                      t.origin >= 0 && t.query_bucket.numel() == t.origin + S && t.key_bucket.numel() == t.origin + S;
  TORCH_CHECK(shaped,
              "roformer::tile_attention: buckets need by_query [B, H, S, R], by_key [B, H, R, S] and two bucket "
              "indices [origin + S] for q ",
              q.sizes(), " and origin ", t.origin);
  TORCH_CHECK(causal || t.origin == S - 1,
              "roformer::tile_attention: buckets for bidirectional attention need origin S - 1 = ", S - 1, "; got ",
              t.origin);
  const int64_t R = t.by_query.size(3);
  for (const at::Tensor& b : {t.query_bucket, t.key_bucket})  // a wrong index would read outside the tables
    TORCH_CHECK(b.numel() == 0 || (b.min().item<int64_t>() >= 0 && b.max().item<int64_t>() < R),
                "roformer::tile_attention: bucket indices must lie in [0, ", R, ")");
  const at::ScalarType acc = accumulation(q);
  TileCudaBuckets tables;
  keep.push_back(t.by_query.to(q.device(), acc).contiguous());
  tables.by_query = keep.back().data_ptr();
  keep.push_back(t.by_key.to(q.device(), acc).contiguous());
  tables.by_key = keep.back().data_ptr();
  keep.push_back(t.query_bucket.to(q.device(), at::kLong).contiguous());
  tables.query_bucket = keep.back().data_ptr<int64_t>() + t.origin;
  keep.push_back(t.key_bucket.to(q.device(), at::kLong).contiguous());
  tables.key_bucket = keep.back().data_ptr<int64_t>() + t.origin;
  tables.buckets = R;
  return tables;
}

}  // namespace tile_attention_cuda_setup

bool tile_attention_cuda_shape_supported(int64_t head_dim, torch::ScalarType dtype, const torch::Device& device) {
#ifdef ROFORMER_WITH_CUDA
  return device.is_cuda() && tile_attention_cuda_setup::built_for_device(head_dim, dtype, device);
#else
  (void)head_dim, (void)dtype, (void)device;
  return false;
#endif
}

namespace tile_attention_cuda_setup {

// Whether t is laid out as the kernel reads q: q's shape, dtype and device, unit stride along D, and
// for the 16-bit types (two values per 32-bit load) even offsets and strides.
bool like_q(const at::Tensor& t, const at::Tensor& q) {
  if (!t.defined() || t.sizes() != q.sizes() || t.scalar_type() != q.scalar_type() || t.device() != q.device())
    return false;
  if (t.stride(3) != 1) return false;
  return t.element_size() != 2 ||
         (t.storage_offset() % 2 == 0 && t.stride(0) % 2 == 0 && t.stride(1) % 2 == 0 && t.stride(2) % 2 == 0);
}

// The rotations of the term (two of them past a distance, or chunks) into the launch.
void describe_rotations(const TileTerm& term, const at::Tensor& q, bool causal, TileCudaLaunch& p) {
  auto rows = [](const at::Tensor& t, const void*& data, int64_t(&stride)[3]) {
    data = t.data_ptr();
    for (int a = 0; a < 3; ++a) stride[a] = t.stride(a);
  };
  if (term.chunk > 0) {
    TORCH_CHECK(causal && like_q(term.far_q, q) && like_q(term.far_k, q) && like_q(term.mid_q, q),
                "roformer::tile_attention: chunks need causal attention and mid_q, far_q, far_k like q");
    rows(term.mid_q, p.mid_q, p.mid_q_stride);
    p.chunk = term.chunk;
  } else if (term.far_q.defined() || term.far_k.defined()) {
    TORCH_CHECK(causal && like_q(term.far_q, q) && like_q(term.far_k, q) && !std::isnan(term.far_threshold),
                "roformer::tile_attention: two rotations need causal attention, far_q and far_k like q, and a "
                "threshold");
    if (term.far_threshold >= static_cast<double>(q.size(2))) return;                 // no pair is far
    p.far_from = static_cast<int64_t>(std::ceil(std::max(term.far_threshold, 0.0)));  // d >= t for whole d
  } else {
    return;
  }
  rows(term.far_q, p.far_q, p.far_q_stride);
  rows(term.far_k, p.far_k, p.far_k_stride);
}

// A relative table's queries and tables (checked as the CPU kernel checks them) in q's dtype on
// its device, rows of D from the first, kept alive in `keep`.
TileCudaRelative relative_tables(const RelativeTerm& t, const at::Tensor& q, bool causal,
                                 std::vector<at::Tensor>& keep) {
  const int64_t H = q.size(1), S = q.size(2), D = q.size(3), rows = t.origin + S;
  auto shaped = [&](const at::Tensor& table) {
    return table.dim() == 3 && table.size(0) == H && table.size(1) >= rows && table.size(2) == D;
  };
  TORCH_CHECK(like_q(t.q, q) && t.origin >= 0 && shaped(t.table) && (!t.value_table.defined() || shaped(t.value_table)),
              "roformer::tile_attention: a relative table needs queries like q and tables [H, >= origin + S, D] for "
              "q ",
              q.sizes(), " and origin ", t.origin, ", got ", t.table.defined() ? t.table.sizes() : at::IntArrayRef{});
  TORCH_CHECK(causal || t.origin >= S - 1,
              "roformer::tile_attention: a relative table for bidirectional attention needs origin >= S - 1 = ", S - 1,
              "; got ", t.origin);
  auto rows_of_d = [&](const at::Tensor& table, int64_t& head_stride) {  // heads may share the rows
    at::Tensor r = table.narrow(1, 0, rows).to(q.device(), q.scalar_type());
    if (r.stride(2) != 1 || r.stride(1) != D) r = r.contiguous();
    keep.push_back(r);
    head_stride = r.stride(0);
    return r.data_ptr();
  };
  TileCudaRelative relative;
  relative.q = t.q.data_ptr();
  for (int a = 0; a < 3; ++a) relative.q_stride[a] = t.q.stride(a);
  relative.table = rows_of_d(t.table, relative.table_head_stride);
  if (t.value_table.defined()) relative.value = rows_of_d(t.value_table, relative.value_head_stride);
  relative.origin = t.origin;
  return relative;
}

}  // namespace tile_attention_cuda_setup

bool tile_attention_cuda_supports(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  if (!q.defined() || q.dim() != 4 || !q.is_cuda()) return false;
  using tile_attention_cuda_setup::like_q;
  return like_q(q, q) && like_q(k, q) && like_q(v, q) &&
         tile_attention_cuda_shape_supported(q.size(3), q.scalar_type(), q.device());
}

TileCudaLaunch describe_tile_cuda(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& out, double scale, bool causal, const TileTerm& term,
                                  TileNormalizer normalizer, const torch::Tensor& key_lengths,
                                  std::vector<torch::Tensor>& keep) {
  using namespace tile_attention_cuda_setup;
  const bool fox = std::holds_alternative<FoxTerm>(term.added), fire = std::holds_alternative<FireTerm>(term.added);
  const bool buckets = std::holds_alternative<BucketTerm>(term.added),
             cope = std::holds_alternative<CopeTerm>(term.added),
             relative = std::holds_alternative<RelativeTerm>(term.added);
  TORCH_CHECK(fox || fire || buckets || cope || relative || std::holds_alternative<NoTerm>(term.added),
              "roformer::tile_attention on CUDA: this family's term runs on the CPU only (CUDA has none, FoX, FIRE, "
              "DeBERTa's buckets, CoPE and relative tables)");
  const int64_t B = q.size(0), H = q.size(1), S = q.size(2);
  TileCudaLaunch p = describe(q, k, v, out, scale * term.score_factor, causal);
  describe_rotations(term, q, causal, p);
  p.weights = static_cast<TileCudaWeights>(static_cast<int>(normalizer));
  TORCH_CHECK((!cope && normalizer == TileNormalizer::softmax) || (causal && !p.far_q),
              "roformer::tile_attention on CUDA: CoPE and stick-breaking need causal attention without RoPE's "
              "remaps");
  TORCH_CHECK(!relative || normalizer == TileNormalizer::softmax,
              "roformer::tile_attention on CUDA: a relative table takes softmax only");
  describe_key_lengths(key_lengths, q, p, keep);
  if (fox) {
    keep.push_back(std::get<FoxTerm>(term.added).cumulative.to(q.device(), accumulation(q)).contiguous());
    TORCH_CHECK(keep.back().sizes() == at::IntArrayRef({B, H, S}),
                "roformer::tile_attention: FoX's running sums must be [B, H, S] = [", B, ", ", H, ", ", S, "], got ",
                keep.back().sizes());
    p.term = TileCudaTerm::fox;
    p.cumulative = keep.back().data_ptr();
  }
  if (fire) {
    p.term = TileCudaTerm::fire;
    p.fire = fire_tables(std::get<FireTerm>(term.added), q, causal, keep);
  }
  if (buckets) {
    p.term = TileCudaTerm::buckets;
    p.buckets = bucket_tables(std::get<BucketTerm>(term.added), q, causal, keep);
  }
  if (cope) {
    keep.push_back(std::get<CopeTerm>(term.added).at_integers.to(q.device(), accumulation(q)).contiguous());
    const at::Tensor& table = keep.back();
    TORCH_CHECK(table.dim() == 4 && table.size(3) >= 1 && table.sizes().slice(0, 3) == q.sizes().slice(0, 3),
                "roformer::tile_attention: CoPE needs q . e [B, H, S, P] for q ", q.sizes(), ", got ", table.sizes());
    p.term = TileCudaTerm::cope;
    p.cope.at_integers = table.data_ptr();
    p.cope.positions = table.size(3);
  }
  if (relative) {
    p.term = TileCudaTerm::relative;
    p.relative = relative_tables(std::get<RelativeTerm>(term.added), q, causal, keep);
  }
  return p;
}

TileCudaLaunch describe_tile_cuda_bias(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const torch::Tensor& out, double scale, bool causal,
                                       const torch::Tensor& bias_rows, const torch::Tensor& key_lengths,
                                       std::vector<torch::Tensor>& keep) {
  using namespace tile_attention_cuda_setup;
  const int64_t H = q.size(1), S = q.size(2);
  TORCH_CHECK(
      bias_rows.dim() == 2 && (bias_rows.size(0) == H || bias_rows.size(0) == 1) && bias_rows.size(1) == 2 * S - 1,
      "roformer::tile_attention_bias: the bias rows must be [H or 1, 2S - 1] = [", H, ", ", 2 * S - 1, "], got ",
      bias_rows.sizes());
  keep.push_back(bias_rows.to(q.device(), accumulation(q)).contiguous());
  TileCudaLaunch p = describe(q, k, v, out, scale, causal);
  p.term = TileCudaTerm::bias_rows;
  p.bias = keep.back().data_ptr();
  p.bias_head_stride = keep.back().size(0) == 1 ? 0 : keep.back().stride(0);
  describe_key_lengths(key_lengths, q, p, keep);
  return p;
}

std::pair<torch::Tensor, torch::Tensor> tile_attention_cuda_with_lse(const torch::Tensor& q, const torch::Tensor& k,
                                                                     const torch::Tensor& v, double scale, bool causal,
                                                                     const TileTerm& term, TileNormalizer normalizer,
                                                                     const torch::Tensor& key_lengths, bool keep_lse) {
  using namespace tile_attention_cuda_setup;
  TORCH_CHECK(!keep_lse || normalizer == TileNormalizer::softmax,
              "roformer::tile_attention: a log-sum-exp is kept for softmax only");
  const at::Tensor& sq = term.q.defined() ? term.q : q;
  const at::Tensor& sk = term.k.defined() ? term.k : k;
  check_tensors(sq, sk, v);
  const int64_t B = sq.size(0), H = sq.size(1), S = sq.size(2), D = sq.size(3);
  at::Tensor out = at::empty({B, S, H, D}, sq.options()).transpose(1, 2);
  at::Tensor lse = keep_lse ? at::empty({B, H, S}, sq.options().dtype(accumulation(sq))) : at::Tensor();
  std::vector<at::Tensor> keep;  // the launch's tables, alive until the kernel is queued (stream-ordered reuse)
  TileCudaLaunch p = describe_tile_cuda(sq, sk, v, out, scale, causal, term, normalizer, key_lengths, keep);
  if (sq.numel() == 0) return {out, lse};
  if (keep_lse) p.lse = lse.data_ptr();
  run(p, sq.device());
  return {out, lse};
}

torch::Tensor tile_attention_bias(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                                  bool causal, const torch::Tensor& bias_rows, const torch::Tensor& key_lengths) {
  using namespace tile_attention_cuda_setup;
  check_tensors(q, k, v);
  const int64_t B = q.size(0), H = q.size(1), S = q.size(2), D = q.size(3);
  at::Tensor out = at::empty({B, S, H, D}, q.options()).transpose(1, 2);
  std::vector<at::Tensor> keep;
  const TileCudaLaunch p = describe_tile_cuda_bias(q, k, v, out, scale, causal, bias_rows, key_lengths, keep);
  if (q.numel() == 0) return out;
  run(p, q.device());
  return out;
}

}  // namespace roformer::ops
