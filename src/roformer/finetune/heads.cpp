// Task heads and losses (see heads.h).
#include "roformer/finetune/heads.h"

#include <torch/torch.h>

#include "roformer/model/encoder.h"

namespace roformer::finetune {

ClassificationHeadImpl::ClassificationHeadImpl(int64_t hidden, int64_t num_labels, double dropout,
                                               config::Activation activation)
    : dropout_(dropout), activation_(activation) {
  dense = register_module("dense", torch::nn::Linear(hidden, hidden));
  out_proj = register_module("out_proj", torch::nn::Linear(hidden, num_labels));
}

torch::Tensor ClassificationHeadImpl::forward(const torch::Tensor& hidden) {
  torch::Tensor x = torch::dropout(hidden.select(1, 0), dropout_, is_training());  // the [CLS] token: [B, H]
  x = model::activate(at::linear(x, dense->weight, dense->bias), activation_);
  x = torch::dropout(x, dropout_, is_training());
  return at::linear(x, out_proj->weight, out_proj->bias);
}

torch::Tensor classification_loss(const torch::Tensor& logits, const torch::Tensor& labels) {
  const auto acc =
      logits.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;  // bf16 logits: fp32 loss
  return torch::nn::functional::cross_entropy(logits.to(acc), labels);
}

torch::Tensor regression_loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  return torch::mse_loss(logits.squeeze(-1), targets.to(logits.scalar_type()));
}

torch::Tensor triplet_loss(const torch::Tensor& score_ab, const torch::Tensor& score_ac, const torch::Tensor& b_closer,
                           TripletLoss kind, double margin) {
  if (kind == TripletLoss::softmax) {
    const torch::Tensor target = (~b_closer.to(torch::kBool)).to(torch::kLong);  // class 0: B is closer
    return torch::nn::functional::cross_entropy(torch::stack({score_ab, score_ac}, 1), target);
  }
  const torch::Tensor closer = torch::where(b_closer, score_ab, score_ac);
  const torch::Tensor other = torch::where(b_closer, score_ac, score_ab);
  return torch::relu(margin - (closer - other)).mean();
}

}  // namespace roformer::finetune
