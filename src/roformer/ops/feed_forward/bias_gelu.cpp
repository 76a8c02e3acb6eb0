// Fused bias + GELU op: argument checks, the BiasGeluLaunch description, device dispatch and
// the autograd Function (saves x and bias; backward recomputes x + bias and GELU's derivative
// in one pass rather than keeping the pre-activation).
#include "roformer/ops/feed_forward/bias_gelu.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#ifdef ROFORMER_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "roformer/ops/common/kernel_dtype_torch.h"
#include "roformer/ops/feed_forward/bias_gelu_kernels.h"

namespace roformer::ops {
namespace {

// Checks shapes and devices; returns the launch with rows, cols, dtype, kind and bias filled.
BiasGeluLaunch describe(const at::Tensor& x, const at::Tensor& bias_acc, bool tanh) {
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) > 0, "roformer::bias_gelu: x must have a non-empty last dimension, got ",
              x.sizes());
  TORCH_CHECK(bias_acc.dim() == 1 && bias_acc.size(0) == x.size(-1), "roformer::bias_gelu: bias of shape ",
              bias_acc.sizes(), " does not match x's last dimension ", x.size(-1));
  TORCH_CHECK(bias_acc.device() == x.device(), "roformer::bias_gelu: x and bias must be on one device");
  BiasGeluLaunch p;
  p.cols = x.size(-1);
  p.rows = x.numel() / p.cols;
  p.dtype = to_kernel_dtype(x.scalar_type(), "roformer::bias_gelu");
  p.kind = tanh ? GeluKind::tanh : GeluKind::exact;
  p.bias = bias_acc.data_ptr();
  return p;
}

at::Tensor forward_impl(const at::Tensor& x_in, const at::Tensor& bias, bool tanh) {
  const at::Tensor x = x_in.contiguous();
  const at::Tensor b = bias.to(accumulate_dtype(x.scalar_type())).contiguous();
  at::Tensor out = at::empty_like(x);
  BiasGeluLaunch p = describe(x, b, tanh);
  if (p.rows == 0) return out;
  p.x = x.data_ptr();
  p.out = out.data_ptr();
  if (x.is_cpu()) {
    bias_gelu_forward_cpu(p);
#ifdef ROFORMER_WITH_CUDA
  } else if (x.is_cuda()) {
    const c10::cuda::CUDAGuard guard(x.device());
    bias_gelu_forward_cuda(p, c10::cuda::getCurrentCUDAStream(x.device().index()).stream());
#endif
  } else {
    TORCH_CHECK(false, "roformer::bias_gelu: no kernel for device ", x.device());
  }
  return out;
}

// d loss / d x and d loss / d bias (in bias's dtype).
std::pair<at::Tensor, at::Tensor> backward_impl(const at::Tensor& grad_in, const at::Tensor& x_in,
                                                const at::Tensor& bias, bool tanh) {
  const at::Tensor x = x_in.contiguous();
  const at::Tensor g = grad_in.to(x.scalar_type()).contiguous();
  const at::Tensor b = bias.to(accumulate_dtype(x.scalar_type())).contiguous();
  at::Tensor grad_x = at::empty_like(x);
  BiasGeluLaunch p = describe(x, b, tanh);
  if (p.rows == 0) return {grad_x, at::zeros_like(bias)};
  at::Tensor grad_b;  // the kernel writes every column
  p.x = x.data_ptr();
  p.grad = g.data_ptr();
  p.out = grad_x.data_ptr();
  if (x.is_cpu()) {
    grad_b = at::empty({p.cols}, x.options().dtype(accumulate_dtype(x.scalar_type())));
    p.bias_grad = grad_b.data_ptr();
    bias_gelu_backward_cpu(p);
#ifdef ROFORMER_WITH_CUDA
  } else if (x.is_cuda()) {
    const c10::cuda::CUDAGuard guard(x.device());
    bias_gelu_backward_cuda(p, c10::cuda::getCurrentCUDAStream(x.device().index()).stream());
    grad_b = grad_x.reshape({-1, p.cols}).sum(0, /*keepdim=*/false, accumulate_dtype(x.scalar_type()));
#endif
  } else {
    TORCH_CHECK(false, "roformer::bias_gelu: no kernel for device ", x.device());
  }
  return {grad_x, grad_b.to(bias.scalar_type())};
}

class BiasGeluFunction : public torch::autograd::Function<BiasGeluFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& bias,
                            bool tanh) {
    ctx->save_for_backward({x, bias});
    ctx->saved_data["tanh"] = tanh;
    return forward_impl(x, bias, tanh);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto [grad_x, grad_b] = backward_impl(grads[0], saved[0], saved[1], ctx->saved_data["tanh"].toBool());
    return {grad_x.view(saved[0].sizes()), grad_b, at::Tensor()};
  }
};

}  // namespace

torch::Tensor bias_gelu(const torch::Tensor& x, const torch::Tensor& bias, bool tanh) {
  if (!at::GradMode::is_enabled() || (!x.requires_grad() && !bias.requires_grad())) return forward_impl(x, bias, tanh);
  return BiasGeluFunction::apply(x, bias, tanh);
}

}  // namespace roformer::ops
