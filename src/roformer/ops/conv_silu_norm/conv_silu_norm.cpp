// The short convolution + SiLU + group norm op: its checks and its autograd Function (saves x
// and the weight; the backward recomputes the convolution and SiLU row by row).
#include "roformer/ops/conv_silu_norm/conv_silu_norm.h"

#include <torch/autograd.h>

#include "roformer/ops/common/kernel_dtype_torch.h"
#include "roformer/ops/conv_silu_norm/conv_silu_norm_kernels.h"

namespace roformer::ops {
namespace {

ConvSiluNormLaunch describe(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  ConvSiluNormLaunch p;
  p.dtype = to_kernel_dtype(x.scalar_type(), "roformer::conv_silu_norm");
  p.batch = x.size(0);
  p.length = x.size(1);
  p.groups = x.size(2);
  p.group = x.size(3);
  p.eps = eps;
  p.x = x.data_ptr();
  p.weight = weight.data_ptr();
  return p;
}

class ConvSiluNormFunction : public torch::autograd::Function<ConvSiluNormFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& weight_in, double eps) {
    const torch::Tensor x = x_in.contiguous(), weight = weight_in.reshape({-1, 3}).contiguous();
    torch::Tensor out = torch::empty_like(x);
    ConvSiluNormLaunch p = describe(x, weight, eps);
    p.out = out.data_ptr();
    conv_silu_norm_forward_cpu(p);
    ctx->save_for_backward({x, weight});
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["weight_shape"] = weight_in.sizes().vec();
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &weight = saved[1];
    const torch::Tensor grad = grads[0].stride(3) == 1 ? grads[0] : grads[0].contiguous();
    const int64_t chunks = (x.size(1) + kConvSiluNormChunk - 1) / kConvSiluNormChunk;
    torch::Tensor d_x = torch::empty_like(x),
                  parts = torch::empty({x.size(0) * chunks, 3, weight.size(0)}, x.options());
    ConvSiluNormLaunch p = describe(x, weight, ctx->saved_data["eps"].toDouble());
    p.grad = grad.data_ptr();
    p.grad_batch_stride = grad.stride(0);
    p.grad_token_stride = grad.stride(1);
    p.grad_group_stride = grad.stride(2);
    p.d_x = d_x.data_ptr();
    p.d_weight_parts = parts.data_ptr();
    conv_silu_norm_backward_cpu(p);
    return {d_x, parts.sum(0).t().reshape(ctx->saved_data["weight_shape"].toIntVector()), torch::Tensor()};
  }
};

}  // namespace

bool conv_silu_norm_takes(const torch::Tensor& x) {
  return x.is_cpu() && x.dim() == 4 && (x.scalar_type() == torch::kFloat32 || x.scalar_type() == torch::kFloat64);
}

torch::Tensor conv_silu_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  TORCH_CHECK(conv_silu_norm_takes(x),
              "roformer::conv_silu_norm: needs x [B, S, G, D] on the CPU in float or double, got ", x.sizes(), " ",
              x.scalar_type(), " on ", x.device());
  TORCH_CHECK(weight.numel() == x.size(2) * x.size(3) * 3 && weight.size(-1) == 3 &&
                  weight.scalar_type() == x.scalar_type() && weight.is_cpu(),
              "roformer::conv_silu_norm: the weight must hold 3 taps per channel of x ", x.sizes(),
              " in its dtype, got ", weight.sizes(), " ", weight.scalar_type());
  return ConvSiluNormFunction::apply(x, weight, eps);
}

}  // namespace roformer::ops
