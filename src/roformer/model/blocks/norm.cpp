// LayerNorm and RMSNorm as the layer's norm part (see norm.h).
#include "roformer/model/blocks/norm.h"

#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/torch.h>

#include "roformer/common/autocast.h"
#include "roformer/ops/add_layer_norm/add_layer_norm.h"

namespace roformer::model {

RmsNormImpl::RmsNormImpl(int64_t width, double eps, double offset) : eps_(eps), offset_(offset) {
  weight = register_parameter("weight", torch::full({width}, 1.0 - offset));
}

torch::Tensor rms_normalized(const torch::Tensor& x, double eps) {
  const auto acc = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(autocast_keys());  // the dtypes are ours
  const torch::Tensor h = x.to(acc);
  return h * torch::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps);
}

torch::Tensor RmsNormImpl::forward(const torch::Tensor& x) const {
  const torch::Tensor normed = rms_normalized(x, eps_);
  if (offset_ != 0.0) return (normed * (weight.to(normed.scalar_type()) + offset_)).to(x.scalar_type());
  return weight.to(x.scalar_type()) * normed.to(x.scalar_type());
}

NormPart::NormPart(torch::nn::Module& parent, config::NormKind kind, int64_t width, double eps, double offset,
                   const std::string& prefix) {
  if (kind == config::NormKind::rms_norm) {
    rms_norm = parent.register_module(prefix + "RMSNorm", RmsNorm(width, eps, offset));
  } else {
    layer_norm = parent.register_module(prefix + "LayerNorm",
                                        torch::nn::LayerNorm(torch::nn::LayerNormOptions({width}).eps(eps)));
  }
}

torch::Tensor NormPart::forward(const torch::Tensor& x) const {
  return rms_norm.is_empty() ? norm(layer_norm, x) : rms_norm->forward(x);
}

// Through the fused op, the LayerNorm's weight and bias stay in their own dtype (the op reads
// them in float), where the reference path casts them to a half-precision x's dtype.
torch::Tensor NormPart::add_norm(const torch::Tensor& x, const torch::Tensor& residual,
                                 config::NormKernel kernel) const {
  const bool fused = kernel != config::NormKernel::reference && !layer_norm.is_empty();  // auto: fused everywhere
  if (!fused || residual.scalar_type() != x.scalar_type()) return forward(x + residual);
  return ops::add_layer_norm(x, residual, layer_norm->weight, layer_norm->bias, layer_norm->options.eps());
}

// Under autocast at::layer_norm runs in fp32 and returns fp32 (autocast's fp32 list): the
// residual stream would be fp32, costing a cast before every matmul and mixed-dtype adds in
// forward and backward. Here the half-precision kernel runs (its mean and variance still
// accumulate in fp32) with gamma and beta cast to the input's dtype; fp32 and fp64 inputs take
// the module as before.
torch::Tensor norm(torch::nn::LayerNorm ln, const torch::Tensor& x) {
  const auto dtype = x.scalar_type();
  if (dtype != torch::kBFloat16 && dtype != torch::kHalf) return ln->forward(x);
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(autocast_keys());
  return at::layer_norm(x, ln->options.normalized_shape(), ln->weight.to(dtype), ln->bias.to(dtype), ln->options.eps());
}

DenseNormImpl::DenseNormImpl(int64_t in, int64_t out, double eps, config::NormKind kind, bool bias, double offset,
                             bool with_post_norm) {
  dense = register_module("dense", torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias)));
  norm = NormPart(*this, kind, out, eps, offset);
  if (with_post_norm) post_norm = NormPart(*this, kind, out, eps, offset, "post_");
}

}  // namespace roformer::model
