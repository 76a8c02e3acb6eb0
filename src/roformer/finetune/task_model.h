// The fine-tuned model: the pretrained encoder under `roformer.` and a task head under
// `classifier.` -- Hugging Face RoFormerForSequenceClassification's names, so a fine-tuned
// classifier converts to it. The head reads the [CLS] (first) token of a bidirectional
// encoder, or the last real token of a causal one (the only token that has seen the input).
// A triplet bi-encoder scores by the cosine of mean-pooled states instead (no head).
// Also the batching of task inputs (padded to the longest in the batch) and the task loss.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <vector>

#include "roformer/finetune/heads.h"
#include "roformer/finetune/task_data.h"
#include "roformer/model/encoder.h"

namespace roformer::finetune {

// Padded inputs of one forward pass: ids/types [R, S] (R rows: one per input), mask [R, S].
struct TaskInputs {
  torch::Tensor ids, mask, types;
};

// Rows in order; ids padded with `pad_id`, mask 1 on real tokens.
TaskInputs collate(const std::vector<const EncodedInput*>& rows, int64_t pad_id, const torch::Device& device);

// Gold values of a batch of examples: labels int64 [B], scores float64 [B].
struct TaskTargets {
  torch::Tensor labels, scores;
};

// The model inputs of `examples` (for triplets: every (A,B) row, then every (A,C) row).
TaskInputs collate_examples(const std::vector<const TaskExample*>& examples, int64_t pad_id,
                            const torch::Device& device);
TaskTargets targets_of(const std::vector<const TaskExample*>& examples, const torch::Device& device);

class TaskModelImpl : public torch::nn::Module {
 public:
  TaskModelImpl(const config::ModelConfig& model, const TaskSpec& spec, double classifier_dropout, uint64_t seed,
                int64_t checkpoint_every = 0);

  // Head outputs [R, num_labels], float32 (float64 for a double model) whatever the autocast.
  torch::Tensor forward(const TaskInputs& in);
  // Mean of the final hidden states over each row's real tokens: [R, H] (float32/64).
  torch::Tensor pooled(const TaskInputs& in);
  // Outputs per example: classification [B, C], regression [B], triplets [B, 2] (s(A,B), s(A,C)):
  // the head's score of each pair, or (bi-encoder) scale * cos(pooled A, pooled B or C).
  torch::Tensor example_outputs(const TaskInputs& in, int64_t examples);
  // Mean loss over the examples of `in`.
  torch::Tensor loss(const TaskInputs& in, const TaskTargets& gold, const config::FinetuneConfig& finetune);

  const TaskSpec& spec() const { return spec_; }

  model::EncoderModel roformer{nullptr};
  ClassificationHead classifier{nullptr};

 private:
  TaskSpec spec_;
  bool causal_;
};
TORCH_MODULE(TaskModel);

// The mean loss of per-example outputs (example_outputs) against the gold values.
torch::Tensor task_loss(const TaskSpec& spec, const torch::Tensor& outputs, const TaskTargets& gold,
                        const config::FinetuneConfig& finetune);

}  // namespace roformer::finetune
