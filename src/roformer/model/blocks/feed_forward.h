// The layer's feed-forward part, chosen by model.feed_forward: BERT's MLP, down(act(up(x)))
// (intermediate.dense, then output.dense), or the gated GLU, down(act(gate(x)) * up(x)) (the
// gate in intermediate.gate): SwiGLU with model.activation silu (Llama, Mistral, Qwen), GeGLU
// with gelu (Gemma). The activations, also used by the heads, live here too.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include "roformer/config/config.h"

namespace roformer::model {

// The activation named by model.activation (also used by the fine-tuning heads).
torch::Tensor activate(const torch::Tensor& x, config::Activation a);
// activate(layer(x)), with bias + GELU in the fused op (ops/bias_gelu) where `kernel` picks it
// for x's device (model.activation_kernel); ReLU and SiLU always take the reference path.
torch::Tensor dense_activate(const torch::nn::Linear& layer, const torch::Tensor& x, config::Activation a,
                             config::ActivationKernel kernel);

class IntermediateImpl : public torch::nn::Module {
 public:
  IntermediateImpl(int64_t hidden, int64_t ffn, config::FeedForwardKind kind = config::FeedForwardKind::mlp,
                   bool bias = true);
  torch::nn::Linear dense{nullptr};  // up: [F, H]
  torch::nn::Linear gate{nullptr};   // glu only: [F, H]
};
TORCH_MODULE(Intermediate);

// The feed-forward layer on h [..., H]: `up` is the layer's Intermediate, `down` its output dense.
torch::Tensor feed_forward(const IntermediateImpl& up, const torch::nn::Linear& down, const torch::Tensor& h,
                           const config::ModelConfig& c);

}  // namespace roformer::model
