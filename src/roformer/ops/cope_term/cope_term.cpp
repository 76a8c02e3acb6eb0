// Fused CoPE term: argument checks, the CopeTermLaunch description and the autograd Function
// (saves the scores and the table products; backward recomputes gates and positions per row).
#include "roformer/ops/cope_term/cope_term.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include "roformer/ops/common/kernel_dtype_torch.h"
#include "roformer/ops/cope_term/cope_term_kernels.h"

namespace roformer::ops {
namespace {

// Checks shapes, devices and dtypes of the (contiguous, accumulation-dtype) inputs.
CopeTermLaunch describe(const at::Tensor& scores, const at::Tensor& at_integers) {
  TORCH_CHECK(scores.dim() >= 1 && at_integers.dim() == scores.dim(),
              "roformer::cope_term: scores and at_integers need the same number of dimensions, got ", scores.sizes(),
              " and ", at_integers.sizes());
  TORCH_CHECK(scores.sizes().slice(0, scores.dim() - 1) == at_integers.sizes().slice(0, scores.dim() - 1),
              "roformer::cope_term: scores ", scores.sizes(), " and at_integers ", at_integers.sizes(),
              " differ before their last dimension");
  TORCH_CHECK(at_integers.size(-1) >= 1, "roformer::cope_term: at_integers needs at least one position");
  TORCH_CHECK(scores.is_cpu() && at_integers.is_cpu(), "roformer::cope_term: CPU tensors only, got ", scores.device());
  CopeTermLaunch p;
  p.keys = scores.size(-1);
  p.positions = at_integers.size(-1);
  p.rows = p.keys == 0 ? 0 : scores.numel() / p.keys;
  p.dtype = to_kernel_dtype(scores.scalar_type(), "roformer::cope_term");
  p.scores = scores.data_ptr();
  p.at_integers = at_integers.data_ptr();
  return p;
}

at::Tensor forward_impl(const at::Tensor& scores, const at::Tensor& at_integers) {
  at::Tensor out = at::empty_like(scores);
  CopeTermLaunch p = describe(scores, at_integers);
  p.out = out.data_ptr();
  if (p.rows > 0) cope_term_forward_cpu(p);
  return out;
}

class CopeTermFunction : public torch::autograd::Function<CopeTermFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& scores,
                            const at::Tensor& at_integers) {
    ctx->save_for_backward({scores, at_integers});
    return forward_impl(scores, at_integers);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor grad = grads[0].to(saved[0].scalar_type()).contiguous();
    at::Tensor grad_scores = at::empty_like(saved[0]);
    at::Tensor grad_at_integers = at::empty_like(saved[1]);
    CopeTermLaunch p = describe(saved[0], saved[1]);
    p.grad = grad.data_ptr();
    p.out = grad_scores.data_ptr();
    p.grad_at_integers = grad_at_integers.data_ptr();
    if (p.rows > 0) cope_term_backward_cpu(p);
    return {grad_scores, grad_at_integers};
  }
};

}  // namespace

torch::Tensor cope_term(const torch::Tensor& scores, const torch::Tensor& at_integers) {
  const auto acc = accumulate_dtype(scores.scalar_type());
  const at::Tensor s = scores.to(acc).contiguous();
  const at::Tensor a = at_integers.to(acc).contiguous();
  if (!at::GradMode::is_enabled() || (!s.requires_grad() && !a.requires_grad())) return forward_impl(s, a);
  return CopeTermFunction::apply(s, a);
}

}  // namespace roformer::ops
