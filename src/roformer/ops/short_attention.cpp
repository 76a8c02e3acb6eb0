// Short-sequence attention op: argument checks, the ShortAttentionLaunch description and the
// autograd Function (saves q, k, v and each score row's log-sum-exp; see short_attention.h).
#include "roformer/ops/short_attention.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <cmath>

#include "roformer/ops/kernel_dtype_torch.h"
#include "roformer/ops/short_attention_kernels.h"

namespace roformer::ops {
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

// out, and the rows' log-sum-exp when `keep` (else an undefined tensor).
std::pair<at::Tensor, at::Tensor> forward_impl(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                               bool causal, bool keep) {
  ShortAttentionLaunch p = describe(q, causal);
  at::Tensor out = empty_bshd(q);
  at::Tensor lse;
  if (keep) lse = at::empty({p.batch * p.heads, p.seq}, q.options());
  p.q = operand(q);
  p.k = operand(k);
  p.v = operand(v);
  p.out = operand(out);
  p.lse = keep ? lse.data_ptr() : nullptr;
  if (out.numel() > 0) short_attention_forward_cpu(p);
  return {out, lse};
}

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

}  // namespace

bool short_attention_supports(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  if (q.dim() != 4 || !q.is_cpu() || !k.is_cpu() || !v.is_cpu()) return false;
  if (q.scalar_type() != at::kFloat && q.scalar_type() != at::kDouble) return false;
  if (k.scalar_type() != q.scalar_type() || v.scalar_type() != q.scalar_type()) return false;
  if (!k.sizes().equals(q.sizes()) || !v.sizes().equals(q.sizes())) return false;
  const int64_t S = q.size(2), D = q.size(3);
  return S >= 1 && S <= kShortAttentionMaxSeq && D > 0 && D % 8 == 0;
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

}  // namespace roformer::ops
