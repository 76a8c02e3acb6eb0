// Task heads on the encoder's hidden states, with Hugging Face RoFormer's parameter names so a
// fine-tuned classifier converts to RoFormerForSequenceClassification:
//   classifier.dense (H -> H), classifier.out_proj (H -> num_labels), on the [CLS] (first) token:
//   out_proj(dropout(act(dense(dropout(h_0))))).
// Losses: cross-entropy over labels, mean squared error for regression (num_labels = 1, as HF's
// problem_type "regression"), and for triplets (A, B, C) a softmax over the two pair scores
// s(A,B), s(A,C) or a margin ranking loss max(0, margin - (s_closer - s_other)).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "roformer/config/config.h"

namespace roformer::finetune {

class ClassificationHeadImpl : public torch::nn::Module {
 public:
  ClassificationHeadImpl(int64_t hidden, int64_t num_labels, double dropout, config::Activation activation);
  // hidden [B, S, H] -> logits [B, num_labels]
  torch::Tensor forward(const torch::Tensor& hidden);

  torch::nn::Linear dense{nullptr};     // weight [H, H]
  torch::nn::Linear out_proj{nullptr};  // weight [num_labels, H]

 private:
  double dropout_;
  config::Activation activation_;
};
TORCH_MODULE(ClassificationHead);

// Mean cross-entropy of logits [B, C] against class ids [B].
torch::Tensor classification_loss(const torch::Tensor& logits, const torch::Tensor& labels);
// Mean squared error of logits [B, 1] against targets [B].
torch::Tensor regression_loss(const torch::Tensor& logits, const torch::Tensor& targets);

enum class TripletLoss { softmax, margin };
// Scores of (A,B) and (A,C), each [B]; b_closer [B] bool. Softmax: cross-entropy of the two
// scores with the closer one as the class; margin: mean max(0, margin - (closer - other)).
torch::Tensor triplet_loss(const torch::Tensor& score_ab, const torch::Tensor& score_ac, const torch::Tensor& b_closer,
                           TripletLoss kind, double margin = 1.0);

}  // namespace roformer::finetune
