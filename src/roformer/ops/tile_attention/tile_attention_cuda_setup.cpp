// Tile attention on CUDA tensors: argument checks, the term's table in the accumulation dtype on
// the device, and the launch (tile_attention_cuda_launch.h). Evaluation only; a build without our CUDA
// kernels says so.
#include <ATen/ATen.h>

#include <string>
#include <utility>

#include "roformer/ops/common/kernel_dtype_torch.h"
#include "roformer/ops/tile_attention/tile_attention.h"
#include "roformer/ops/tile_attention/tile_attention_cuda_launch.h"

#ifdef ROFORMER_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace roformer::ops {
namespace tile_attention_cuda_setup {

bool dtype_on_device(torch::ScalarType dtype, const torch::Device& device) {
  if (dtype == at::kFloat || dtype == at::kDouble) return true;
  if (dtype != at::kHalf && dtype != at::kBFloat16) return false;
#ifdef ROFORMER_WITH_CUDA
  return at::cuda::getDeviceProperties(device.index() < 0 ? at::cuda::current_device() : device.index())->major >= 8;
#else
  return false;
#endif
}

void check_tensors(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  TORCH_CHECK(tile_attention_cuda_supports(q, k, v),
              "roformer::tile_attention on CUDA: q, k, v must be [B, H, S, D] CUDA tensors on one device, of one "
              "dtype (float32, float64, or float16/bfloat16 on compute capability 8.0+), equal shapes, unit stride "
              "along D, D 32, 64 or 128; got ",
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

// q's dtype's accumulation type: float64 for float64, else float32.
at::ScalarType accumulation(const at::Tensor& q) {
  return q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

}  // namespace tile_attention_cuda_setup

bool tile_attention_cuda_shape_supported(int64_t head_dim, torch::ScalarType dtype, const torch::Device& device) {
#ifdef ROFORMER_WITH_CUDA
  return device.is_cuda() && tile_cuda_head_dim_supported(head_dim) &&
         tile_attention_cuda_setup::dtype_on_device(dtype, device);
#else
  (void)head_dim, (void)dtype, (void)device;
  return false;
#endif
}

bool tile_attention_cuda_supports(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  if (!q.defined() || !k.defined() || !v.defined() || q.dim() != 4 || !q.is_cuda()) return false;
  if (k.device() != q.device() || v.device() != q.device()) return false;
  if (k.scalar_type() != q.scalar_type() || v.scalar_type() != q.scalar_type()) return false;
  if (k.sizes() != q.sizes() || v.sizes() != q.sizes()) return false;
  if (q.stride(3) != 1 || k.stride(3) != 1 || v.stride(3) != 1) return false;
  if (q.element_size() == 2)  // two values per 32-bit load: even offsets and strides
    for (const at::Tensor* t : {&q, &k, &v})
      if (t->storage_offset() % 2 != 0 || t->stride(0) % 2 != 0 || t->stride(1) % 2 != 0 || t->stride(2) % 2 != 0)
        return false;
  return tile_attention_cuda_shape_supported(q.size(3), q.scalar_type(), q.device());
}

std::pair<torch::Tensor, torch::Tensor> tile_attention_cuda_with_lse(const torch::Tensor& q, const torch::Tensor& k,
                                                                     const torch::Tensor& v, double scale, bool causal,
                                                                     const TileTerm& term,
                                                                     const torch::Tensor& key_lengths, bool keep_lse) {
  using namespace tile_attention_cuda_setup;
  const at::Tensor& sq = term.q.defined() ? term.q : q;
  const at::Tensor& sk = term.k.defined() ? term.k : k;
  check_tensors(sq, sk, v);
  TORCH_CHECK(!term.far_q.defined() && term.chunk == 0,
              "roformer::tile_attention on CUDA: no second rotation or chunks (the CPU kernel has them)");
  const bool fox = std::holds_alternative<FoxTerm>(term.added);
  TORCH_CHECK(fox || std::holds_alternative<NoTerm>(term.added),
              "roformer::tile_attention on CUDA: this family's term runs on the CPU only (CUDA has none and FoX)");
  const int64_t B = sq.size(0), H = sq.size(1), S = sq.size(2), D = sq.size(3);
  at::Tensor out = at::empty({B, S, H, D}, sq.options()).transpose(1, 2);
  at::Tensor lse = keep_lse ? at::empty({B, H, S}, sq.options().dtype(accumulation(sq))) : at::Tensor();
  if (sq.numel() == 0) return {out, lse};
  TileCudaLaunch p = describe(sq, sk, v, out, scale * term.score_factor, causal);
  if (keep_lse) p.lse = lse.data_ptr();
  at::Tensor lengths, cumulative;
  if (key_lengths.defined()) {
    TORCH_CHECK(key_lengths.dim() == 1 && key_lengths.size(0) == B,
                "roformer::tile_attention: key lengths must be [B] for q ", sq.sizes(), ", got ", key_lengths.sizes());
    lengths = key_lengths.to(sq.device(), at::kLong).contiguous();
    p.key_lengths = lengths.data_ptr<int64_t>();
  }
  if (fox) {
    cumulative = std::get<FoxTerm>(term.added).cumulative.to(sq.device(), accumulation(sq)).contiguous();
    TORCH_CHECK(cumulative.sizes() == at::IntArrayRef({B, H, S}),
                "roformer::tile_attention: FoX's running sums must be [B, H, S] = [", B, ", ", H, ", ", S, "], got ",
                cumulative.sizes());
    p.term = TileCudaTerm::fox;
    p.cumulative = cumulative.data_ptr();
  }
  run(p, sq.device());
  return {out, lse};
}

torch::Tensor tile_attention_bias(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                                  bool causal, const torch::Tensor& bias_rows) {
  using namespace tile_attention_cuda_setup;
  check_tensors(q, k, v);
  const int64_t B = q.size(0), H = q.size(1), S = q.size(2), D = q.size(3);
  TORCH_CHECK(
      bias_rows.dim() == 2 && (bias_rows.size(0) == H || bias_rows.size(0) == 1) && bias_rows.size(1) == 2 * S - 1,
      "roformer::tile_attention_bias: the bias rows must be [H or 1, 2S - 1] = [", H, ", ", 2 * S - 1, "], got ",
      bias_rows.sizes());
  at::Tensor out = at::empty({B, S, H, D}, q.options()).transpose(1, 2);
  if (q.numel() == 0) return out;
  const at::Tensor bias = bias_rows.to(q.device(), accumulation(q)).contiguous();
  TileCudaLaunch p = describe(q, k, v, out, scale, causal);
  p.term = TileCudaTerm::bias_rows;
  p.bias = bias.data_ptr();
  p.bias_head_stride = bias.size(0) == 1 ? 0 : bias.stride(0);
  run(p, q.device());
  return out;
}

}  // namespace roformer::ops
