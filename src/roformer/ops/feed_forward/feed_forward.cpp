// Blocked feed-forward op: argument checks, outputs, and the autograd Function (saves x, the
// pre-activation and the activation, as the unfused layers' autograd does, and the weights).
#include "roformer/ops/feed_forward/feed_forward.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <unistd.h>

#include "roformer/ops/feed_forward/feed_forward_kernels.h"

namespace roformer::ops {
namespace {

FeedForwardTensors describe(const at::Tensor& x, const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2,
                            const at::Tensor& b2, bool tanh) {
  TORCH_CHECK(feed_forward_supports(x, w1, b1, w2, b2),
              "roformer::feed_forward: needs CPU tensors of one dtype (float32 or float64) with x [..., H], w1 [F, H], "
              "b1 [F], w2 [H', F], b2 [H']; got x ",
              x.sizes(), " ", x.scalar_type(), " on ", x.device(), ", w1 ", w1.sizes(), ", b1 ", b1.sizes(), ", w2 ",
              w2.sizes(), ", b2 ", b2.sizes());
  return {x.reshape({-1, x.size(-1)}).contiguous(), w1.contiguous(), b1.contiguous(), w2.contiguous(), b2.contiguous(),
          tanh ? GeluKind::tanh : GeluKind::exact};
}

std::vector<int64_t> with_last(const at::Tensor& x, int64_t last) {
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = last;
  return sizes;
}

// y [M, H'] and, for the backward, pre and act [M, F].
std::array<at::Tensor, 3> run_forward(const FeedForwardTensors& t) {
  const int64_t M = t.x.size(0), F = t.w1.size(0);
  at::Tensor pre = at::empty({M, F}, t.x.options()), act = at::empty({M, F}, t.x.options());
  at::Tensor y = at::empty({M, t.w2.size(0)}, t.x.options());
  if (M > 0) feed_forward_forward_cpu(t, pre, act, y);
  return {y, pre, act};
}

class FeedForwardFunction : public torch::autograd::Function<FeedForwardFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w1,
                            const at::Tensor& b1, const at::Tensor& w2, const at::Tensor& b2, bool tanh) {
    const FeedForwardTensors t = describe(x, w1, b1, w2, b2, tanh);
    auto [y, pre, act] = run_forward(t);
    ctx->save_for_backward({t.x, t.w1, t.b1, t.w2, t.b2, pre, act});
    ctx->saved_data["tanh"] = tanh;
    return y.view(with_last(x, t.w2.size(0)));
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto s = ctx->get_saved_variables();
    const FeedForwardTensors t{s[0], s[1], s[2],
                               s[3], s[4], ctx->saved_data["tanh"].toBool() ? GeluKind::tanh : GeluKind::exact};
    const at::Tensor dy = grads[0].reshape({-1, t.w2.size(0)}).to(t.x.scalar_type()).contiguous();
    FeedForwardGradients g;
    if (t.x.size(0) > 0) {
      g = feed_forward_backward_cpu(t, s[5], s[6], dy);
    } else {
      g = {at::zeros_like(t.x), at::zeros_like(t.w1), at::zeros_like(t.b1), at::zeros_like(t.w2), at::zeros_like(t.b2)};
    }
    return {g.dx.view(with_last(grads[0], t.w1.size(1))), g.dw1, g.db1, g.dw2, g.db2, at::Tensor()};
  }
};

}  // namespace

bool feed_forward_supports(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& b1,
                           const torch::Tensor& w2, const torch::Tensor& b2) {
  const at::ScalarType dt = x.scalar_type();
  if (dt != at::kFloat && dt != at::kDouble) return false;
  for (const at::Tensor* t : {&x, &w1, &b1, &w2, &b2})
    if (!t->defined() || !t->is_cpu() || t->scalar_type() != dt) return false;
  return x.dim() >= 1 && w1.dim() == 2 && b1.dim() == 1 && w2.dim() == 2 && b2.dim() == 1 && w1.size(1) == x.size(-1) &&
         b1.size(0) == w1.size(0) && w2.size(1) == w1.size(0) && b2.size(0) == w2.size(0) && w1.size(0) > 0;
}

bool feed_forward_fits_cache(int64_t F, int64_t H, int64_t element_size) {
  static const int64_t l2 = [] {
    const long bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return bytes > 0 ? static_cast<int64_t>(bytes) : int64_t{512} << 10;
  }();
  return (kFeedForwardBlockRows * F + F * H) * element_size <= l2;
}

torch::Tensor feed_forward(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& b1,
                           const torch::Tensor& w2, const torch::Tensor& b2, bool tanh) {
  const bool any_grad =
      x.requires_grad() || w1.requires_grad() || b1.requires_grad() || w2.requires_grad() || b2.requires_grad();
  if (at::GradMode::is_enabled() && any_grad) return FeedForwardFunction::apply(x, w1, b1, w2, b2, tanh);
  const FeedForwardTensors t = describe(x, w1, b1, w2, b2, tanh);
  return std::get<0>(run_forward(t)).view(with_last(x, t.w2.size(0)));
}

}  // namespace roformer::ops
