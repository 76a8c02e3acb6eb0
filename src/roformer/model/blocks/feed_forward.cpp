// BERT's MLP and the gated GLU as the layer's feed-forward part (see feed_forward.h).
#include "roformer/model/blocks/feed_forward.h"

#include <torch/torch.h>

#include "roformer/model/attention.h"
#include "roformer/ops/feed_forward/bias_gelu.h"
#include "roformer/ops/feed_forward/feed_forward.h"

namespace roformer::model {
namespace {

bool is_gelu(config::Activation a) {
  return a == config::Activation::gelu || a == config::Activation::gelu_tanh;
}

// down(act(up(h))): the blocked CPU op (ops/feed_forward) for a GELU where the op takes the tensors
// and model.activation_kernel is fused, or auto and a block's working set fits the cache (where it
// is faster); else dense_activate and dense.
torch::Tensor mlp(const torch::nn::Linear& up, const torch::nn::Linear& down, const torch::Tensor& h,
                  const config::ModelConfig& c) {
  const torch::Tensor& w1 = up->weight;
  const bool wanted = c.activation_kernel == config::ActivationKernel::fused ||
                      (c.activation_kernel == config::ActivationKernel::auto_ &&
                       ops::feed_forward_fits_cache(w1.size(0), w1.size(1), w1.element_size()));
  if (wanted && is_gelu(c.activation) && ops::feed_forward_supports(h, w1, up->bias, down->weight, down->bias))
    return ops::feed_forward(h, w1, up->bias, down->weight, down->bias, c.activation == config::Activation::gelu_tanh);
  return dense(down, dense_activate(up, h, c.activation, c.activation_kernel));
}

}  // namespace

torch::Tensor activate(const torch::Tensor& x, config::Activation a) {
  switch (a) {
    case config::Activation::gelu:
      return torch::gelu(x);
    case config::Activation::gelu_tanh:
      return torch::gelu(x, "tanh");
    case config::Activation::relu:
      return torch::relu(x);
    case config::Activation::silu:
      return torch::silu(x);
  }
  return x;
}

torch::Tensor dense_activate(const torch::nn::Linear& layer, const torch::Tensor& x, config::Activation a,
                             config::ActivationKernel kernel) {
  const bool fused =
      is_gelu(a) && layer->bias.defined() &&
      (kernel == config::ActivationKernel::fused || (kernel == config::ActivationKernel::auto_ && !x.is_cuda()));
  if (!fused) return activate(dense(layer, x), a);
  return ops::bias_gelu(at::linear(x, layer->weight), layer->bias, a == config::Activation::gelu_tanh);
}

IntermediateImpl::IntermediateImpl(int64_t hidden, int64_t ffn, config::FeedForwardKind kind, bool bias) {
  dense = register_module("dense", torch::nn::Linear(torch::nn::LinearOptions(hidden, ffn).bias(bias)));
  if (kind == config::FeedForwardKind::glu)
    gate = register_module("gate", torch::nn::Linear(torch::nn::LinearOptions(hidden, ffn).bias(bias)));
}

torch::Tensor feed_forward(const IntermediateImpl& up, const torch::nn::Linear& down, const torch::Tensor& h,
                           const config::ModelConfig& c) {
  if (up.gate.is_empty()) return mlp(up.dense, down, h, c);
  return dense(down, activate(dense(up.gate, h), c.activation) * dense(up.dense, h));
}

}  // namespace roformer::model
