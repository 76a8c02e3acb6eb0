// Short-sequence attention op: argument checks, the ShortAttentionLaunch description and the
// autograd Function (saves q, k, v and each score row's log-sum-exp; see short_attention.h).
#include "roformer/ops/short_attention/short_attention.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <cmath>
#include <vector>

#include "roformer/ops/common/kernel_dtype_torch.h"
#include "roformer/ops/common/rotation_math.h"
#include "roformer/ops/short_attention/short_attention_kernels.h"

namespace roformer::ops {
static_assert(kShortAttentionMaxHeadDim <= kShortAttentionKernelMaxHeadDim, "the kernel's row scratch is too small");
namespace {

// [B, H, S, D] with unit stride along D: the tensor itself, else a contiguous copy.
at::Tensor unit_last_stride(const at::Tensor& t) {
  return t.stride(3) == 1 ? t : t.contiguous();
}

AttentionOperand operand(const at::Tensor& t) {
  AttentionOperand o;
  o.data = t.data_ptr();
  for (int i = 0; i < 3; ++i) o.stride[i] = t.stride(i);
  return o;
}

// An uninitialised [B, H, S, D] tensor with [B, S, H, D] memory.
at::Tensor empty_bshd(const at::Tensor& like) {
  return at::empty({like.size(0), like.size(2), like.size(1), like.size(3)}, like.options()).transpose(1, 2);
}

ShortAttentionLaunch describe(const at::Tensor& q, bool causal) {
  ShortAttentionLaunch p;
  p.dtype = to_kernel_dtype(q.scalar_type(), "roformer::short_attention");
  p.batch = q.size(0);
  p.heads = q.size(1);
  p.seq = q.size(2);
  p.head_dim = q.size(3);
  p.padded_seq = (p.seq + 15) / 16 * 16;
  p.causal = causal;
  p.scale = 1.0 / std::sqrt(static_cast<double>(p.head_dim));
  return p;
}

// Runs a described launch's forward: out ([B, H, S, D] like q, its memory [B, S, H, D]) and the
// rows' log-sum-exp when `keep` (else an undefined tensor).
std::pair<at::Tensor, at::Tensor> run_forward(ShortAttentionLaunch p, const at::Tensor& q, bool keep) {
  at::Tensor out = empty_bshd(q);
  at::Tensor lse;
  if (keep) lse = at::empty({p.batch * p.heads, p.seq}, q.options());
  p.out = operand(out);
  p.lse = keep ? lse.data_ptr() : nullptr;
  if (out.numel() > 0) short_attention_forward_cpu(p);
  return {out, lse};
}

std::pair<at::Tensor, at::Tensor> forward_impl(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                               bool causal, bool keep) {
  ShortAttentionLaunch p = describe(q, causal);
  p.q = operand(q);
  p.k = operand(k);
  p.v = operand(v);
  return run_forward(p, q, keep);
}

// short_attention_cope's launch: q, k, v, the scale and the CoPE table [B, H, S, P] (contiguous).
ShortAttentionLaunch describe_cope(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const at::Tensor& at_integers, double scale, bool causal) {
  ShortAttentionLaunch p = describe(q, causal);
  p.scale = scale;
  p.q = operand(q);
  p.k = operand(k);
  p.v = operand(v);
  p.cope_at_integers = at_integers.data_ptr();
  p.cope_positions = at_integers.size(3);
  return p;
}

class ShortAttentionCopeFunction : public torch::autograd::Function<ShortAttentionCopeFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, const at::Tensor& at_integers, double scale, bool causal) {
    auto [out, lse] = run_forward(describe_cope(q, k, v, at_integers, scale, causal), q, /*keep=*/true);
    ctx->save_for_backward({q, k, v, at_integers, lse});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["causal"] = causal;
    return out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &at_integers = saved[3], &lse = saved[4];
    const at::Tensor grad_out = unit_last_stride(grads[0].to(q.scalar_type()));
    ShortAttentionLaunch p =
        describe_cope(q, k, v, at_integers, ctx->saved_data["scale"].toDouble(), ctx->saved_data["causal"].toBool());
    at::Tensor dq = empty_bshd(q), dk = empty_bshd(q), dv = empty_bshd(q);
    at::Tensor da = at::empty_like(at_integers);
    p.lse = lse.data_ptr();
    p.grad_out = operand(grad_out);
    p.grad_q = operand(dq);
    p.grad_k = operand(dk);
    p.grad_v = operand(dv);
    p.grad_cope_at_integers = da.data_ptr();
    if (dq.numel() > 0) short_attention_backward_cpu(p);
    return {dq, dk, dv, da, at::Tensor(), at::Tensor()};
  }
};

// short_attention_bias's launch: q, k, v and the relative bias [H, 2S - 1] (contiguous, q's dtype).
ShortAttentionLaunch describe_bias(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const at::Tensor& bias, bool causal) {
  ShortAttentionLaunch p = describe(q, causal);
  p.q = operand(q);
  p.k = operand(k);
  p.v = operand(v);
  p.rel_bias = bias.data_ptr();
  return p;
}

class ShortAttentionBiasFunction : public torch::autograd::Function<ShortAttentionBiasFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, const at::Tensor& bias, bool causal) {
    auto [out, lse] = run_forward(describe_bias(q, k, v, bias, causal), q, /*keep=*/true);
    ctx->save_for_backward({q, k, v, bias, lse});
    ctx->saved_data["causal"] = causal;
    return out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &bias = saved[3], &lse = saved[4];
    const at::Tensor grad_out = unit_last_stride(grads[0].to(q.scalar_type()));
    ShortAttentionLaunch p = describe_bias(q, k, v, bias, ctx->saved_data["causal"].toBool());
    at::Tensor dq = empty_bshd(q), dk = empty_bshd(q), dv = empty_bshd(q);
    at::Tensor by_pair = at::zeros({p.batch * p.heads, 2 * p.seq - 1}, q.options());  // summed over B below
    p.lse = lse.data_ptr();
    p.grad_out = operand(grad_out);
    p.grad_q = operand(dq);
    p.grad_k = operand(dk);
    p.grad_v = operand(dv);
    p.grad_rel_bias = by_pair.data_ptr();
    if (dq.numel() > 0) short_attention_backward_cpu(p);
    return {dq, dk, dv, by_pair.view({p.batch, p.heads, 2 * p.seq - 1}).sum(0), at::Tensor()};
  }
};

class ShortAttentionFunction : public torch::autograd::Function<ShortAttentionFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, bool causal) {
    auto [out, lse] = forward_impl(q, k, v, causal, /*keep=*/true);
    ctx->save_for_backward({q, k, v, lse});
    ctx->saved_data["causal"] = causal;
    return out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &lse = saved[3];
    const at::Tensor grad_out = unit_last_stride(grads[0].to(q.scalar_type()));
    ShortAttentionLaunch p = describe(q, ctx->saved_data["causal"].toBool());
    at::Tensor dq = empty_bshd(q), dk = empty_bshd(q), dv = empty_bshd(q);
    p.q = operand(q);
    p.k = operand(k);
    p.v = operand(v);
    p.lse = lse.data_ptr();
    p.grad_out = operand(grad_out);
    p.grad_q = operand(dq);
    p.grad_k = operand(dk);
    p.grad_v = operand(dv);
    if (dq.numel() > 0) short_attention_backward_cpu(p);
    return {dq, dk, dv, at::Tensor()};
  }
};

// The [B, H, S, D] view of part `i` (0 q, 1 k, 2 v) of a [B, S, 3 H D] projection.
at::Tensor part_of(const at::Tensor& qkv, int64_t heads, int64_t i) {
  const int64_t B = qkv.size(0), S = qkv.size(1), D = qkv.size(2) / (3 * heads);
  return qkv.view({B, S, 3, heads, D}).select(2, i).transpose(1, 2);
}

// Fills the launch's operands, bias and rotation for a projection (an empty bias or rotation:
// none; autograd Functions take no undefined tensors).
ShortAttentionLaunch describe_qkv(const at::Tensor& qkv, const at::Tensor& bias, int64_t heads, bool causal,
                                  const at::Tensor& rotation, bool interleaved, const at::Tensor& relative) {
  ShortAttentionLaunch p = describe(part_of(qkv, heads, 0), causal);
  p.q = operand(part_of(qkv, heads, 0));
  p.k = operand(part_of(qkv, heads, 1));
  p.v = operand(part_of(qkv, heads, 2));
  p.bias = bias.numel() > 0 ? bias.data_ptr() : nullptr;
  p.rotation = rotation.numel() > 0 ? rotation.data_ptr() : nullptr;
  p.interleaved = interleaved;
  p.rel_bias = relative.numel() > 0 ? relative.data_ptr() : nullptr;
  return p;
}

class ShortAttentionQkvFunction : public torch::autograd::Function<ShortAttentionQkvFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& qkv, const at::Tensor& bias,
                            int64_t heads, bool causal, const at::Tensor& rotation, bool interleaved,
                            const at::Tensor& relative) {
    auto [out, lse] = run_forward(describe_qkv(qkv, bias, heads, causal, rotation, interleaved, relative),
                                  part_of(qkv, heads, 0), true);
    ctx->save_for_backward({qkv, bias, rotation, lse, relative});
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["interleaved"] = interleaved;
    return out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &qkv = saved[0], &bias = saved[1], &rotation = saved[2], &lse = saved[3], &relative = saved[4];
    const int64_t heads = ctx->saved_data["heads"].toInt();
    ShortAttentionLaunch p = describe_qkv(qkv, bias, heads, ctx->saved_data["causal"].toBool(), rotation,
                                          ctx->saved_data["interleaved"].toBool(), relative);
    const at::Tensor grad_out = unit_last_stride(grads[0].to(qkv.scalar_type()));
    at::Tensor grad_qkv = at::empty_like(qkv, at::MemoryFormat::Contiguous);
    const bool has_bias = bias.numel() > 0;
    at::Tensor grad_bias;  // [B, 3, H, D] per batch element, summed below
    if (has_bias) grad_bias = at::zeros({p.batch, 3, heads, p.head_dim}, qkv.options());
    p.lse = lse.data_ptr();
    p.grad_out = operand(grad_out);
    p.grad_q = operand(part_of(grad_qkv, heads, 0));
    p.grad_k = operand(part_of(grad_qkv, heads, 1));
    p.grad_v = operand(part_of(grad_qkv, heads, 2));
    p.grad_bias = has_bias ? grad_bias.data_ptr() : nullptr;
    at::Tensor by_pair;  // the relative bias's gradient per (batch, head), summed over the batch below
    if (relative.numel() > 0) by_pair = at::zeros({p.batch * heads, 2 * p.seq - 1}, qkv.options());
    p.grad_rel_bias = by_pair.defined() ? by_pair.data_ptr() : nullptr;
    if (grad_qkv.numel() > 0) short_attention_backward_cpu(p);
    if (has_bias) grad_bias = grad_bias.sum(0).view({-1});
    const at::Tensor grad_relative =
        by_pair.defined() ? by_pair.view({p.batch, heads, 2 * p.seq - 1}).sum(0) : at::Tensor();
    return {grad_qkv, grad_bias, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), grad_relative};
  }
};

struct RotationSpec {
  const double* inv_freq;
  int64_t half;  // pairs per head
  double position_scale, magnitude;
  bool interleaved;
};

// short_attention_rotation's rows for positions ids[0, S) into table [2, S, 2 half]: cos and sin
// from rope_table_row in acc_t (float: the float kernels' own; double: libm's), times the
// magnitude in acc_t, placed at each pair's two features with the sin's sign.
template <typename acc_t>
void rotation_rows(const RotationSpec& r, const int64_t* ids, int64_t S, double* table) {
  const int64_t D = 2 * r.half;
  double* cos = table;
  double* sin = table + S * D;
  std::vector<acc_t> row(D);  // cos of every pair, then sin
  const acc_t m = static_cast<acc_t>(r.magnitude);
  for (int64_t s = 0; s < S; ++s) {
    rope_table_row(ids[s], r.position_scale, r.inv_freq, r.half, row.data());
    for (int64_t i = 0; i < r.half; ++i) {
      const double c = row[i] * m, n = row[r.half + i] * m;
      const int64_t first = r.interleaved ? 2 * i : i, second = r.interleaved ? 2 * i + 1 : i + r.half;
      cos[s * D + first] = c, cos[s * D + second] = c;
      sin[s * D + first] = -n, sin[s * D + second] = n;
    }
  }
}

}  // namespace

bool short_attention_shape_supported(int64_t seq, int64_t head_dim, at::ScalarType dtype, const at::Device& device) {
  return device.is_cpu() && (dtype == at::kFloat || dtype == at::kDouble) && seq >= 1 && seq <= kShortAttentionMaxSeq &&
         head_dim > 0 && head_dim % 8 == 0 && head_dim <= kShortAttentionMaxHeadDim;
}

bool short_attention_supports(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  if (q.dim() != 4 || !k.is_cpu() || !v.is_cpu()) return false;
  if (k.scalar_type() != q.scalar_type() || v.scalar_type() != q.scalar_type()) return false;
  if (!k.sizes().equals(q.sizes()) || !v.sizes().equals(q.sizes())) return false;
  return short_attention_shape_supported(q.size(2), q.size(3), q.scalar_type(), q.device());
}

torch::Tensor short_attention(const torch::Tensor& q_in, const torch::Tensor& k_in, const torch::Tensor& v_in,
                              bool causal) {
  TORCH_CHECK(short_attention_supports(q_in, k_in, v_in),
              "roformer::short_attention: needs [B, H, S, D] CPU tensors of one dtype (float32 or float64), equal "
              "shapes, S <= ",
              kShortAttentionMaxSeq, ", D a multiple of 8; got q ", q_in.sizes(), " ", q_in.scalar_type(), " on ",
              q_in.device(), ", k ", k_in.sizes(), ", v ", v_in.sizes());
  const at::Tensor q = unit_last_stride(q_in), k = unit_last_stride(k_in), v = unit_last_stride(v_in);
  const bool grad = at::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad());
  if (!grad) return forward_impl(q, k, v, causal, /*keep=*/false).first;
  return ShortAttentionFunction::apply(q, k, v, causal);
}

torch::Tensor short_attention_cope(const torch::Tensor& q_in, const torch::Tensor& k_in, const torch::Tensor& v_in,
                                   const torch::Tensor& at_integers_in, double scale, bool causal) {
  TORCH_CHECK(short_attention_supports(q_in, k_in, v_in),
              "roformer::short_attention_cope: needs [B, H, S, D] CPU tensors of one dtype (float32 or float64), "
              "equal shapes, S <= ",
              kShortAttentionMaxSeq, ", D a multiple of 8; got q ", q_in.sizes(), " ", q_in.scalar_type(), " on ",
              q_in.device(), ", k ", k_in.sizes(), ", v ", v_in.sizes());
  const auto& a = at_integers_in;
  TORCH_CHECK(a.dim() == 4 && a.is_cpu() && a.scalar_type() == q_in.scalar_type() && a.size(0) == q_in.size(0) &&
                  a.size(1) == q_in.size(1) && a.size(2) == q_in.size(2) && a.size(3) >= 1,
              "roformer::short_attention_cope: at_integers must be [", q_in.size(0), ", ", q_in.size(1), ", ",
              q_in.size(2), ", P >= 1] of q's dtype on the CPU; got ", a.sizes(), " ", a.scalar_type(), " on ",
              a.device());
  const at::Tensor q = unit_last_stride(q_in), k = unit_last_stride(k_in), v = unit_last_stride(v_in);
  const at::Tensor at_integers = a.contiguous();
  const bool grad = at::GradMode::is_enabled() &&
                    (q.requires_grad() || k.requires_grad() || v.requires_grad() || at_integers.requires_grad());
  if (!grad) return run_forward(describe_cope(q, k, v, at_integers, scale, causal), q, /*keep=*/false).first;
  return ShortAttentionCopeFunction::apply(q, k, v, at_integers, scale, causal);
}

torch::Tensor short_attention_bias(const torch::Tensor& q_in, const torch::Tensor& k_in, const torch::Tensor& v_in,
                                   const torch::Tensor& bias_in, bool causal) {
  TORCH_CHECK(short_attention_supports(q_in, k_in, v_in),
              "roformer::short_attention_bias: needs [B, H, S, D] CPU tensors of one dtype (float32 or float64), "
              "equal shapes, S <= ",
              kShortAttentionMaxSeq, ", D a multiple of 8; got q ", q_in.sizes(), " ", q_in.scalar_type(), " on ",
              q_in.device(), ", k ", k_in.sizes(), ", v ", v_in.sizes());
  const int64_t H = q_in.size(1), S = q_in.size(2);
  TORCH_CHECK(bias_in.dim() == 2 && bias_in.size(0) == H && bias_in.size(1) == 2 * S - 1 && bias_in.is_cpu(),
              "roformer::short_attention_bias: bias must be [", H, ", ", 2 * S - 1, "] on the CPU; got ",
              bias_in.sizes(), " on ", bias_in.device());
  const at::Tensor q = unit_last_stride(q_in), k = unit_last_stride(k_in), v = unit_last_stride(v_in);
  const at::Tensor bias = bias_in.to(q.scalar_type()).contiguous();
  const bool grad = at::GradMode::is_enabled() &&
                    (q.requires_grad() || k.requires_grad() || v.requires_grad() || bias.requires_grad());
  if (!grad) return run_forward(describe_bias(q, k, v, bias, causal), q, /*keep=*/false).first;
  return ShortAttentionBiasFunction::apply(q, k, v, bias, causal);
}

bool short_attention_qkv_supports(const torch::Tensor& qkv, int64_t heads) {
  if (qkv.dim() != 3 || heads <= 0 || qkv.size(2) % (3 * heads) != 0) return false;
  const at::Tensor q = part_of(qkv, heads, 0);
  return short_attention_supports(q, q, q);
}

torch::Tensor short_attention_qkv(const torch::Tensor& qkv_in, const torch::Tensor& bias_in, int64_t heads, bool causal,
                                  const torch::Tensor& rotation_in, bool interleaved,
                                  const torch::Tensor& relative_in) {
  TORCH_CHECK(short_attention_qkv_supports(qkv_in, heads),
              "roformer::short_attention_qkv: needs a [B, S, 3 H D] CPU projection (float32 or float64) with S <= ",
              kShortAttentionMaxSeq, " and D a multiple of 8; got ", qkv_in.sizes(), " ", qkv_in.scalar_type(), " on ",
              qkv_in.device(), " with ", heads, " heads");
  const int64_t S = qkv_in.size(1), D = qkv_in.size(2) / (3 * heads);
  TORCH_CHECK(!bias_in.defined() || (bias_in.dim() == 1 && bias_in.size(0) == qkv_in.size(2) &&
                                     bias_in.scalar_type() == qkv_in.scalar_type() && bias_in.is_cpu()),
              "roformer::short_attention_qkv: bias must be [", qkv_in.size(2),
              "] of the projection's dtype on the CPU");
  TORCH_CHECK(!rotation_in.defined() || (rotation_in.dim() == 3 && rotation_in.size(0) == 2 &&
                                         rotation_in.size(1) == S && rotation_in.size(2) == D &&
                                         rotation_in.scalar_type() == qkv_in.scalar_type() && rotation_in.is_cpu()),
              "roformer::short_attention_qkv: rotation must be [2, ", S, ", ", D,
              "] of the projection's dtype on the CPU (short_attention_rotation)");
  TORCH_CHECK(interleaved || D % 2 == 0, "roformer::short_attention_qkv: half pairing needs an even head_dim");
  TORCH_CHECK(!relative_in.defined() || (relative_in.dim() == 2 && relative_in.size(0) == heads &&
                                         relative_in.size(1) == 2 * S - 1 && relative_in.is_cpu()),
              "roformer::short_attention_qkv: relative bias must be [", heads, ", ", 2 * S - 1, "] on the CPU");
  const at::Tensor none = at::empty({0}, qkv_in.options());
  const at::Tensor qkv = qkv_in.contiguous();
  const at::Tensor bias = bias_in.defined() ? bias_in.contiguous() : none;
  const at::Tensor rotation = rotation_in.defined() ? rotation_in.contiguous() : none;
  const at::Tensor relative = relative_in.defined() ? relative_in.to(qkv.scalar_type()).contiguous() : none;
  return ShortAttentionQkvFunction::apply(qkv, bias, heads, causal, rotation, interleaved, relative);
}

torch::Tensor short_attention_rotation(const torch::Tensor& inv_freq, double position_scale, double magnitude,
                                       bool interleaved, const torch::Tensor& positions, at::ScalarType dtype) {
  TORCH_CHECK(inv_freq.dim() == 1 && positions.dim() == 1 && positions.scalar_type() == at::kLong,
              "roformer::short_attention_rotation: inv_freq must be 1-D and positions int64 [S]");
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kDouble, "roformer::short_attention_rotation: float32 or float64");
  const at::Tensor freqs = inv_freq.to(at::kCPU, at::kDouble).contiguous();
  const at::Tensor pos = positions.to(at::kCPU).contiguous();
  const int64_t half = freqs.numel(), S = pos.numel();
  at::Tensor table = at::empty({2, S, 2 * half}, at::TensorOptions().dtype(at::kDouble));
  const RotationSpec spec{freqs.data_ptr<double>(), half, position_scale, magnitude, interleaved};
  if (dtype == at::kFloat) {
    rotation_rows<float>(spec, pos.data_ptr<int64_t>(), S, table.data_ptr<double>());
  } else {
    rotation_rows<double>(spec, pos.data_ptr<int64_t>(), S, table.data_ptr<double>());
  }
  return table.to(dtype);
}

}  // namespace roformer::ops
