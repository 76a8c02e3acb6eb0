// Fused residual add + LayerNorm op: argument checks, the AddLayerNormLaunch description, device
// dispatch and the autograd Function. It saves x, residual, weight, bias and the per-row mean
// and rstd; the backward recomputes x + residual rather than keeping it (the same memory as
// LibTorch's add then layer_norm, which keep the sum instead of the residual).
#include "roformer/ops/add_layer_norm/add_layer_norm.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <cmath>

#ifdef ROFORMER_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "roformer/ops/add_layer_norm/add_layer_norm_kernels.h"
#include "roformer/ops/common/kernel_dtype_torch.h"

namespace roformer::ops {
namespace {

constexpr const char* kOp = "roformer::add_layer_norm";

// Checks shapes, dtypes and devices; returns the launch with sizes, dtype and eps filled.
AddLayerNormLaunch describe(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight,
                            const at::Tensor& bias, double eps) {
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) > 0, kOp, ": x must have a non-empty last dimension, got ", x.sizes());
  TORCH_CHECK(residual.sizes() == x.sizes(), kOp, ": residual of shape ", residual.sizes(), " does not match x's ",
              x.sizes());
  TORCH_CHECK(residual.scalar_type() == x.scalar_type(), kOp, ": residual is ", residual.scalar_type(), " but x is ",
              x.scalar_type(), "; cast one of them");
  for (const at::Tensor* t : {&weight, &bias})
    TORCH_CHECK(t->dim() == 1 && t->size(0) == x.size(-1), kOp, ": weight and bias must be [", x.size(-1),
                "] (x's last dimension), got ", t->sizes());
  for (const at::Tensor* t : {&residual, &weight, &bias})
    TORCH_CHECK(t->device() == x.device(), kOp, ": every argument must be on x's device ", x.device(), ", got ",
                t->device());
  TORCH_CHECK(std::isfinite(eps) && eps > 0, kOp, ": eps must be a positive finite number, got ", eps);
  AddLayerNormLaunch p;
  p.cols = x.size(-1);
  p.rows = x.numel() / p.cols;
  p.dtype = to_kernel_dtype(x.scalar_type(), kOp);
  p.eps = eps;
  return p;
}

struct Forward {
  at::Tensor y, mean, rstd;
};

Forward forward_impl(const at::Tensor& x_in, const at::Tensor& residual_in, const at::Tensor& weight,
                     const at::Tensor& bias, double eps) {
  AddLayerNormLaunch p = describe(x_in, residual_in, weight, bias, eps);
  const at::Tensor x = x_in.contiguous(), r = residual_in.contiguous();
  const at::Tensor w = weight.to(accumulate_dtype(x.scalar_type())).contiguous(),
                   b = bias.to(accumulate_dtype(x.scalar_type())).contiguous();
  Forward f{at::empty_like(x, at::MemoryFormat::Contiguous), at::empty({p.rows}, w.options()),
            at::empty({p.rows}, w.options())};
  if (p.rows == 0) return f;
  p.x = x.data_ptr();
  p.residual = r.data_ptr();
  p.weight = w.data_ptr();
  p.bias = b.data_ptr();
  p.out = f.y.data_ptr();
  p.mean = f.mean.data_ptr();
  p.rstd = f.rstd.data_ptr();
  if (x.is_cpu()) {
    add_layer_norm_forward_cpu(p);
#ifdef ROFORMER_WITH_CUDA
  } else if (x.is_cuda()) {
    const c10::cuda::CUDAGuard guard(x.device());
    add_layer_norm_forward_cuda(p, c10::cuda::getCurrentCUDAStream(x.device().index()).stream());
#endif
  } else {
    TORCH_CHECK(false, kOp, ": no kernel for device ", x.device());
  }
  return f;
}

struct Backward {
  at::Tensor grad_in, grad_weight, grad_bias;  // grad_in is the gradient of x and of residual
};

Backward backward_impl(const at::Tensor& grad, const at::Tensor& x_in, const at::Tensor& residual_in,
                       const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& mean, const at::Tensor& rstd,
                       double eps) {
  AddLayerNormLaunch p = describe(x_in, residual_in, weight, bias, eps);
  const at::Tensor x = x_in.contiguous(), r = residual_in.contiguous();
  const at::Tensor g = grad.to(x.scalar_type()).contiguous();
  const at::Tensor w = weight.to(accumulate_dtype(x.scalar_type())).contiguous();
  Backward out{at::empty_like(x, at::MemoryFormat::Contiguous), {}, {}};
  if (p.rows == 0) return {out.grad_in, at::zeros_like(weight), at::zeros_like(bias)};
  p.x = x.data_ptr();
  p.residual = r.data_ptr();
  p.weight = w.data_ptr();
  p.mean = mean.data_ptr();
  p.rstd = rstd.data_ptr();
  p.grad = g.data_ptr();
  p.grad_in = out.grad_in.data_ptr();
  at::Tensor sums;  // [2, cols]: dL/dw, dL/db in the accumulation type
  if (x.is_cpu()) {
    sums = at::empty({2, p.cols}, w.options());
    p.weight_grad = sums[0].data_ptr();
    p.bias_grad = sums[1].data_ptr();
    add_layer_norm_backward_cpu(p);
#ifdef ROFORMER_WITH_CUDA
  } else if (x.is_cuda()) {
    const c10::cuda::CUDAGuard guard(x.device());
    p.rows_per_block = add_layer_norm_cuda_rows_per_block(p.rows);
    const at::Tensor partial = at::empty({2, add_layer_norm_blocks(p), p.cols}, w.options());
    p.weight_grad_partial = partial[0].data_ptr();
    p.bias_grad_partial = partial[1].data_ptr();
    add_layer_norm_backward_cuda(p, c10::cuda::getCurrentCUDAStream(x.device().index()).stream());
    sums = partial.sum(1);
#endif
  } else {
    TORCH_CHECK(false, kOp, ": no kernel for device ", x.device());
  }
  out.grad_weight = sums[0].to(weight.scalar_type());
  out.grad_bias = sums[1].to(bias.scalar_type());
  return out;
}

class AddLayerNormFunction : public torch::autograd::Function<AddLayerNormFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& residual,
                            const at::Tensor& weight, const at::Tensor& bias, double eps) {
    Forward f = forward_impl(x, residual, weight, bias, eps);
    ctx->save_for_backward({x, residual, weight, bias, f.mean, f.rstd});
    ctx->saved_data["eps"] = eps;
    return f.y;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto s = ctx->get_saved_variables();
    Backward b = backward_impl(grads[0], s[0], s[1], s[2], s[3], s[4], s[5], ctx->saved_data["eps"].toDouble());
    const at::Tensor grad_in = b.grad_in.view(s[0].sizes());
    return {grad_in, grad_in, b.grad_weight, b.grad_bias, at::Tensor()};
  }
};

}  // namespace

torch::Tensor add_layer_norm(const torch::Tensor& x, const torch::Tensor& residual, const torch::Tensor& weight,
                             const torch::Tensor& bias, double eps) {
  const bool needs_grad =
      x.requires_grad() || residual.requires_grad() || weight.requires_grad() || bias.requires_grad();
  if (!at::GradMode::is_enabled() || !needs_grad) return forward_impl(x, residual, weight, bias, eps).y;
  return AddLayerNormFunction::apply(x, residual, weight, bias, eps);
}

}  // namespace roformer::ops
