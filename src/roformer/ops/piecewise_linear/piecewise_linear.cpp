// Piecewise-linear map by head: argument checks, the launch, and the autograd Function (saves the
// inputs and the table; the backward sums per-chunk partials of the table's gradient).
#include "roformer/ops/piecewise_linear/piecewise_linear.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <vector>

#include "roformer/ops/common/kernel_dtype_torch.h"
#include "roformer/ops/piecewise_linear/piecewise_linear_kernels.h"

namespace roformer::ops {
namespace {

PiecewiseLinearLaunch describe(const at::Tensor& x, const at::Tensor& kinks, const at::Tensor& slope,
                               const at::Tensor& intercept) {
  TORCH_CHECK(x.is_cpu() && kinks.is_cpu() && slope.is_cpu() && intercept.is_cpu(),
              "roformer::piecewise_linear: CPU tensors only");
  TORCH_CHECK(
      kinks.dim() == 1 && slope.dim() == 2 && slope.sizes() == intercept.sizes() && slope.size(1) == kinks.size(0) + 1,
      "roformer::piecewise_linear: kinks [W] and slope, intercept [H, W + 1] expected, got ", kinks.sizes(), ", ",
      slope.sizes(), ", ", intercept.sizes());
  TORCH_CHECK(
      x.scalar_type() == slope.scalar_type() && x.scalar_type() == intercept.scalar_type() &&
          x.scalar_type() == kinks.scalar_type() && (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble),
      "roformer::piecewise_linear: x, kinks, slope and intercept must share float32 or float64, got ", x.scalar_type());
  PiecewiseLinearLaunch p;
  p.inputs = x.numel();
  p.heads = slope.size(0);
  p.kinks = kinks.size(0);
  p.dtype = to_kernel_dtype(x.scalar_type(), "roformer::piecewise_linear");
  p.x = x.data_ptr();
  p.kink = kinks.data_ptr();
  p.slope = slope.data_ptr();
  p.intercept = intercept.data_ptr();
  return p;
}

std::vector<int64_t> by_head_shape(int64_t heads, const at::Tensor& x) {
  std::vector<int64_t> shape{heads};
  for (int64_t d : x.sizes()) shape.push_back(d);
  return shape;
}

at::Tensor forward_impl(const at::Tensor& x, const at::Tensor& kinks, const at::Tensor& slope,
                        const at::Tensor& intercept) {
  PiecewiseLinearLaunch p = describe(x, kinks, slope, intercept);
  at::Tensor out = at::empty(by_head_shape(p.heads, x), x.options());
  p.out = out.data_ptr();
  if (p.inputs > 0) piecewise_linear_forward_cpu(p);
  return out;
}

class PiecewiseLinearFunction : public torch::autograd::Function<PiecewiseLinearFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& kinks,
                            const at::Tensor& slope, const at::Tensor& intercept) {
    ctx->save_for_backward({x, kinks, slope, intercept});
    return forward_impl(x, kinks, slope, intercept);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto s = ctx->get_saved_variables();
    const at::Tensor grad = grads[0].to(s[0].scalar_type()).contiguous();
    PiecewiseLinearLaunch p = describe(s[0], s[1], s[2], s[3]);
    const int64_t chunks = (p.inputs + kPiecewiseChunk - 1) / kPiecewiseChunk;
    at::Tensor dx = at::empty_like(s[0]);
    at::Tensor ds = at::zeros({chunks, p.heads, p.kinks + 1}, s[2].options());
    at::Tensor di = at::zeros_like(ds);
    p.grad = grad.data_ptr();
    p.out = dx.data_ptr();
    p.grad_slope = ds.data_ptr();
    p.grad_intercept = di.data_ptr();
    if (p.inputs > 0) piecewise_linear_backward_cpu(p);
    return {dx, at::Tensor(), ds.sum(0), di.sum(0)};
  }
};

}  // namespace

torch::Tensor piecewise_linear(const torch::Tensor& x, const torch::Tensor& kinks, const torch::Tensor& slope,
                               const torch::Tensor& intercept) {
  const at::Tensor xc = x.contiguous(), kc = kinks.detach().contiguous(), sc = slope.contiguous(),
                   ic = intercept.contiguous();
  if (!at::GradMode::is_enabled() || (!xc.requires_grad() && !sc.requires_grad() && !ic.requires_grad()))
    return forward_impl(xc, kc, sc, ic);
  return PiecewiseLinearFunction::apply(xc, kc, sc, ic);
}

}  // namespace roformer::ops
