// Evaluation of a fine-tuned model on a split: the head's outputs for every example (batched,
// no gradients, eval mode), the mean task loss, and the task's metrics as GLUE defines them
// (accuracy, F1 of the positive class, Matthews correlation, Pearson, Spearman); triplets
// score accuracy: the share of triplets where s(A, closer) > s(A, other).
#pragma once

#include <map>
#include <string>

#include "roformer/finetune/task_model.h"

namespace roformer::finetune {

struct TaskScores {
  std::map<std::string, double> metrics;
  double loss = 0;
  int64_t examples = 0;
  torch::Tensor outputs;  // float64 on the CPU, one row per example (see TaskModelImpl::example_outputs)
};

// One JSON line per example: {"index", "output", "prediction", "gold"} (the file a user reads
// for error analysis, and the reference the Hugging Face parity test compares against).
std::string predictions_jsonl(const TaskSpec& spec, const TaskScores& scores, const TaskSplit& split);

// Outputs of every example of `split` on the CPU in float64 (see TaskModelImpl::example_outputs).
torch::Tensor predict(TaskModel& model, const TaskSplit& split, int64_t batch_size, int64_t pad_id,
                      const torch::Device& device, bool autocast);

// The task's metrics from outputs [N, ...] against the split's gold values.
std::map<std::string, double> task_metrics(const TaskSpec& spec, const torch::Tensor& outputs, const TaskSplit& split);

TaskScores evaluate_split(TaskModel& model, const TaskSplit& split, const config::FinetuneConfig& finetune,
                          int64_t pad_id, const torch::Device& device, bool autocast);

}  // namespace roformer::finetune
