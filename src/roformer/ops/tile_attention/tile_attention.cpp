// Tile attention: argument checks, k transposed and padded for the kernel's products, the
// rotations' queries and keys, the launch, and the term's own run (terms/), chosen by its type.
#include "roformer/ops/tile_attention/tile_attention.h"

#include <ATen/ATen.h>

#include <cmath>
#include <utility>
#include <vector>

#include "roformer/ops/common/kernel_dtype_torch.h"
#include "roformer/ops/tile_attention/tile_attention_kernels.h"

namespace roformer::ops {
// Named, not anonymous: in a unity batch an anonymous namespace merges with its neighbours'.
at::Tensor transposed_keys(const at::Tensor& k, int64_t ld) {
  at::Tensor kt = at::zeros({k.size(0), k.size(1), k.size(3), ld}, k.options());
  kt.narrow(3, 0, k.size(2)).copy_(k.transpose(2, 3));
  return kt;
}

namespace tile_attention_setup {

constexpr int64_t kMaxHeadDim = 512;

void check_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, const TileTerm& term) {
  TORCH_CHECK(tile_attention_supports(q, k, v),
              "roformer::tile_attention: q, k, v must be [B, H, S, D] CPU tensors of one dtype (float32 or float64), "
              "equal shapes, q and v with unit stride along D, D a multiple of 8 up to ",
              kMaxHeadDim, "; got ", q.sizes(), " ", q.scalar_type(), ", ", k.sizes(), ", ", v.sizes());
  TORCH_CHECK(!(at::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad())),
              "roformer::tile_attention: no gradient (evaluation only); run it under NoGradGuard");
  TORCH_CHECK(causal || tile_term_properties(term.added).bidirectional,
              "roformer::tile_attention: this term is defined for causal attention only");
  if (term.far_q.defined() || term.far_k.defined())
    TORCH_CHECK(causal && tile_attention_supports(term.far_q, term.far_k, v) && !std::isnan(term.far_threshold),
                "roformer::tile_attention: two rotations need causal attention, far_q and far_k like q, and a "
                "threshold; got ",
                term.far_q.defined() ? term.far_q.sizes() : at::IntArrayRef{}, ", ",
                term.far_k.defined() ? term.far_k.sizes() : at::IntArrayRef{});
  TORCH_CHECK(!tile_term_properties(term.added).forms_scores ||
                  (!term.q.defined() && !term.k.defined() && !term.far_q.defined() && term.chunk == 0),
              "roformer::tile_attention: a term that forms the scores itself takes no other queries or rotations");
}

// The rotations' far (and, with chunks, middle) queries and far keys into the launch, each kept
// alive in `keep`.
void describe_rotations(const TileTerm& term, const at::Tensor& k, const at::Tensor& v, TileAttentionLaunch& p,
                        std::vector<at::Tensor>& keep) {
  if (term.chunk > 0) {
    TORCH_CHECK(
        p.causal && tile_attention_supports(term.far_q, term.far_k, v) && tile_attention_supports(term.mid_q, k, v),
        "roformer::tile_attention: chunks need causal attention and mid_q, far_q, far_k like q");
    keep.push_back(transposed_keys(term.far_k, p.kt_ld));
    p.far_kt = keep.back().data_ptr();
    p.far_q = term.far_q.data_ptr();
    p.mid_q = term.mid_q.data_ptr();
    for (int a = 0; a < 3; ++a) {
      p.far_q_stride[a] = term.far_q.stride(a);
      p.mid_q_stride[a] = term.mid_q.stride(a);
    }
    p.chunk = term.chunk;
  } else if (term.far_q.defined() && term.far_threshold < static_cast<double>(p.seq)) {  // else no pair is far
    keep.push_back(transposed_keys(term.far_k, p.kt_ld));
    p.far_q = term.far_q.data_ptr();
    for (int a = 0; a < 3; ++a) p.far_q_stride[a] = term.far_q.stride(a);
    p.far_kt = keep.back().data_ptr();
    p.far_from = static_cast<int64_t>(std::ceil(std::max(term.far_threshold, 0.0)));  // d >= t for whole d
  }
}

// key_lengths as the kernel reads them: int64 [B] contiguous, each in [1, S].
at::Tensor checked_key_lengths(const at::Tensor& key_lengths, const at::Tensor& q, const TileTerm& term) {
  TORCH_CHECK(tile_term_properties(term.added).key_lengths,
              "roformer::tile_attention: this term takes no key lengths (it passes every position)");
  const at::Tensor lengths = key_lengths.to(at::kCPU, at::kLong).contiguous();
  TORCH_CHECK(lengths.dim() == 1 && lengths.size(0) == q.size(0),
              "roformer::tile_attention: key lengths must be [B] for q ", q.sizes(), ", got ", key_lengths.sizes());
  TORCH_CHECK(
      lengths.numel() == 0 || (lengths.min().item<int64_t>() >= 1 && lengths.max().item<int64_t>() <= q.size(2)),
      "roformer::tile_attention: key lengths must lie in [1, ", q.size(2), "]");
  return lengths;
}

}  // namespace tile_attention_setup

// No term: the loop alone.
void run_tiles(const NoTerm&, const torch::Tensor&, const TileAttentionLaunch& launch) {
  tile_attention_cpu(launch, no_term_items(launch.dtype), nullptr);
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

namespace tile_attention_setup {

// The launch of q, k (the scoring ones: the term's where it replaces them), v and `out`, its
// tensors kept alive in `keep` (k transposed first).
TileAttentionLaunch describe(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
                             double scale, bool causal, const TileTerm& term, TileNormalizer normalizer,
                             const at::Tensor& key_lengths, std::vector<at::Tensor>& keep) {
  const int64_t B = q.size(0), H = q.size(1), S = q.size(2), D = q.size(3);
  TileAttentionLaunch p;
  p.batch = B;
  p.heads = H;
  p.seq = S;
  p.head_dim = D;
  p.causal = causal;
  p.normalizer = static_cast<int>(normalizer);
  p.dtype = to_kernel_dtype(q.scalar_type(), "roformer::tile_attention");
  p.scale = scale * term.score_factor;
  p.kt_ld = (S + 15) / 16 * 16;          // a tile's keys padded to 64 bytes
  keep = {transposed_keys(k, p.kt_ld)};  // what the kernel reads, alive until it returns
  p.q = q.data_ptr();
  p.kt = keep[0].data_ptr();
  p.v = v.data_ptr();
  p.out = out.data_ptr();
  for (int a = 0; a < 3; ++a) {
    p.q_stride[a] = q.stride(a);
    p.v_stride[a] = v.stride(a);
    p.out_stride[a] = out.stride(a);
  }
  describe_rotations(term, k, v, p, keep);
  if (key_lengths.defined()) {
    keep.push_back(checked_key_lengths(key_lengths, q, term));
    p.key_lengths = keep.back().data_ptr<int64_t>();
  }
  return p;
}

// The scoring queries and keys: the term's where it replaces attention's.
const at::Tensor& scoring_q(const at::Tensor& q, const TileTerm& term) {
  return term.q.defined() ? term.q : q;
}
const at::Tensor& scoring_k(const at::Tensor& k, const TileTerm& term) {
  return term.k.defined() ? term.k : k;
}

}  // namespace tile_attention_setup

// A term without a backward in tiles (tile_attention_trains refuses it first).
template <typename Term>
std::vector<at::Tensor> run_tile_grads(const Term&, const at::Tensor&, const TileAttentionLaunch&,
                                       const TileAttentionGrad&) {
  TORCH_CHECK(false, "roformer::tile_attention: this term has no backward in tiles");
}
std::vector<at::Tensor> run_tile_grads(const NoTerm&, const at::Tensor&, const TileAttentionLaunch& launch,
                                       const TileAttentionGrad& grad) {
  tile_attention_grad_cpu(launch, grad, no_term_grad_pairs(launch.dtype), nullptr);
  return {};
}
template <typename Term>
std::vector<at::Tensor> grad_tensors(const Term&) {
  return {};
}

std::pair<torch::Tensor, torch::Tensor> tile_attention_with_lse(const torch::Tensor& q_in, const torch::Tensor& k_in,
                                                                const torch::Tensor& v, double scale, bool causal,
                                                                const TileTerm& term, TileNormalizer normalizer,
                                                                const torch::Tensor& key_lengths, bool keep_lse) {
  if (q_in.is_cuda()) {  // the CUDA kernel, the key lengths checked as here (each in [1, S])
    const at::Tensor lengths =
        key_lengths.defined() ? tile_attention_setup::checked_key_lengths(key_lengths, q_in, term) : key_lengths;
    return tile_attention_cuda_with_lse(q_in, k_in, v, scale, causal, term, normalizer, lengths, keep_lse);
  }
  const at::Tensor& q = tile_attention_setup::scoring_q(q_in, term);
  const at::Tensor& k = tile_attention_setup::scoring_k(k_in, term);
  tile_attention_setup::check_inputs(q, k, v, causal, term);
  TORCH_CHECK(normalizer == TileNormalizer::softmax || causal, "roformer::tile_attention: stick-breaking is causal");
  TORCH_CHECK(!keep_lse || normalizer == TileNormalizer::softmax,
              "roformer::tile_attention: a log-sum-exp is kept for softmax only");
  const int64_t B = q.size(0), H = q.size(1), S = q.size(2), D = q.size(3);
  at::Tensor out = at::empty({B, S, H, D}, q.options()).transpose(1, 2);
  at::Tensor lse = keep_lse ? at::empty({B, H, S}, q.options()) : at::Tensor();
  if (q.numel() == 0) return {out, lse};
  std::vector<at::Tensor> keep;
  TileAttentionLaunch p =
      tile_attention_setup::describe(q, k, v, out, scale, causal, term, normalizer, key_lengths, keep);
  if (keep_lse) p.lse = lse.data_ptr();
  std::visit([&](const auto& added) { run_tiles(added, q, p); }, term.added);
  return {out, lse};
}

torch::Tensor tile_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                             bool causal, const TileTerm& term, TileNormalizer normalizer,
                             const torch::Tensor& key_lengths) {
  return tile_attention_with_lse(q, k, v, scale, causal, term, normalizer, key_lengths, false).first;
}

TileAttentionGrads tile_attention_backward(const torch::Tensor& q_in, const torch::Tensor& k_in, const torch::Tensor& v,
                                           double scale, bool causal, const TileTerm& term, TileNormalizer normalizer,
                                           const torch::Tensor& key_lengths, const torch::Tensor& out,
                                           const torch::Tensor& lse, const torch::Tensor& grad_out) {
  const at::Tensor& q = tile_attention_setup::scoring_q(q_in, term);
  const at::Tensor& k = tile_attention_setup::scoring_k(k_in, term);
  TORCH_CHECK(tile_attention_trains(term, normalizer),
              "roformer::tile_attention_backward: this term has no backward in tiles under this normaliser");
  const bool softmax = normalizer == TileNormalizer::softmax;
  TORCH_CHECK(out.sizes() == q.sizes() && grad_out.sizes() == q.sizes() &&
                  (!softmax || (lse.defined() && lse.sizes() == q.sizes().slice(0, 3))),
              "roformer::tile_attention_backward: out and grad_out must be like q ", q.sizes(),
              " and, for softmax, lse [B, H, S]");
  TORCH_CHECK(softmax || causal, "roformer::tile_attention: stick-breaking is causal");
  const int64_t B = q.size(0), H = q.size(1), S = q.size(2), D = q.size(3);
  TileAttentionGrads grads{at::zeros({B, H, S, D}, q.options()),
                           at::zeros({B, H, S, D}, q.options()),
                           at::zeros({B, H, S, D}, q.options()),
                           {}};
  if (q.numel() == 0) return grads;
  std::vector<at::Tensor> keep;
  const TileAttentionLaunch p =
      tile_attention_setup::describe(q, k, v, out, scale, causal, term, normalizer, key_lengths, keep);
  const at::Tensor dout = grad_out.to(q.scalar_type());
  const at::Tensor dout_rows = dout.stride(3) == 1 ? dout : dout.contiguous();
  const at::Tensor delta = (dout_rows * out).sum(-1).contiguous();
  const at::Tensor lse_rows = softmax ? lse.to(q.scalar_type()).contiguous() : at::Tensor();
  const at::Tensor k_rows = k.stride(3) == 1 ? k : k.contiguous();
  const at::Tensor vt = transposed_keys(v, p.kt_ld);
  TileAttentionGrad g;
  g.lse = softmax ? lse_rows.data_ptr() : nullptr;
  g.delta = delta.data_ptr();
  g.grad_out = dout_rows.data_ptr();
  g.k = k_rows.data_ptr();
  for (int a = 0; a < 3; ++a) {
    g.grad_out_stride[a] = dout_rows.stride(a);
    g.k_stride[a] = k_rows.stride(a);
  }
  g.vt = vt.data_ptr();
  g.grad_q = grads.q.data_ptr();
  g.grad_k = grads.k.data_ptr();
  g.grad_v = grads.v.data_ptr();
  grads.term = std::visit([&](const auto& added) { return run_tile_grads(added, q, p, g); }, term.added);
  grads.q.mul_(p.scale);
  grads.k.mul_(p.scale);
  return grads;
}

std::vector<torch::Tensor> tile_term_grad_tensors(const TileTerm& term) {
  return std::visit([](const auto& added) { return grad_tensors(added); }, term.added);
}

bool tile_attention_trains(const TileTerm& term, TileNormalizer normalizer) {
  return tile_term_properties(term.added).trains_in_tiles(normalizer == TileNormalizer::softmax) &&
         !term.far_q.defined() && term.chunk == 0;
}

}  // namespace roformer::ops
