// Evaluation of a fine-tuned model (see task_eval.h).
#include "roformer/finetune/task_eval.h"

#include <torch/torch.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "roformer/common/autocast.h"
#include "roformer/finetune/metrics.h"

namespace roformer::finetune {
namespace {

// Restores the module's training mode when it goes out of scope.
class EvalMode {
 public:
  explicit EvalMode(torch::nn::Module& m) : m_(m), was_training_(m.is_training()) { m_.eval(); }
  ~EvalMode() { m_.train(was_training_); }

 private:
  torch::nn::Module& m_;
  bool was_training_;
};

std::vector<const TaskExample*> slice(const TaskSplit& split, size_t begin, size_t end) {
  std::vector<const TaskExample*> out;
  for (size_t i = begin; i < end; ++i) out.push_back(&split.examples[i]);
  return out;
}

}  // namespace

torch::Tensor predict(TaskModel& model, const TaskSplit& split, int64_t batch_size, int64_t pad_id,
                      const torch::Device& device, bool autocast) {
  EvalMode mode(*model);
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> outs;
  const size_t n = split.examples.size(), b = static_cast<size_t>(batch_size);
  for (size_t begin = 0; begin < n; begin += b) {
    const auto batch = slice(split, begin, std::min(n, begin + b));
    const TaskInputs in = collate_examples(batch, pad_id, device);
    AutocastGuard guard(autocast);
    outs.push_back(model->example_outputs(in, static_cast<int64_t>(batch.size())).to(torch::kCPU, torch::kFloat64));
  }
  return torch::cat(outs, 0);
}

std::map<std::string, double> task_metrics(const TaskSpec& spec, const torch::Tensor& outputs, const TaskSplit& split) {
  std::map<std::string, double> m;
  const torch::Tensor out = outputs.to(torch::kFloat64).contiguous();
  if (spec.head == HeadKind::regression) {
    const std::vector<double> pred(out.data_ptr<double>(), out.data_ptr<double>() + out.numel());
    std::vector<double> gold;
    for (const TaskExample& e : split.examples) gold.push_back(e.score);
    for (const std::string& name : spec.metrics)
      m[name] = name == "pearson" ? pearson(pred, gold) : spearman(pred, gold);
    return m;
  }
  // Classification: the arg-max class; triplets: 0 when s(A,B) > s(A,C) (B closer), else 1.
  const torch::Tensor arg = spec.head == HeadKind::triplet ? (out.select(1, 1) > out.select(1, 0)).to(torch::kLong)
                                                           : out.argmax(1).contiguous();
  const std::vector<int64_t> pred(arg.data_ptr<int64_t>(), arg.data_ptr<int64_t>() + arg.numel());
  std::vector<int64_t> gold;
  for (const TaskExample& e : split.examples) gold.push_back(e.label);
  for (const std::string& name : spec.metrics) {
    if (name == "accuracy") m[name] = accuracy(pred, gold);
    if (name == "f1") m[name] = f1_binary(pred, gold, 1);
    if (name == "mcc") m[name] = matthews_correlation(pred, gold);
  }
  return m;
}

TaskScores evaluate_split(TaskModel& model, const TaskSplit& split, const config::FinetuneConfig& finetune,
                          int64_t pad_id, const torch::Device& device, bool autocast) {
  TaskScores s;
  const torch::Tensor out = predict(model, split, finetune.eval_batch_size, pad_id, device, autocast);
  s.metrics = task_metrics(model->spec(), out, split);
  s.examples = static_cast<int64_t>(split.examples.size());
  const TaskTargets gold = targets_of(slice(split, 0, split.examples.size()), torch::kCPU);
  s.loss = task_loss(model->spec(), out, gold, finetune).item<double>();
  s.outputs = out;
  return s;
}

std::string predictions_jsonl(const TaskSpec& spec, const TaskScores& scores, const TaskSplit& split) {
  std::string text;
  const torch::Tensor out = scores.outputs.reshape({scores.outputs.size(0), -1}).contiguous();
  for (int64_t i = 0; i < out.size(0); ++i) {
    const auto* row = out[i].data_ptr<double>();
    const std::vector<double> output(row, row + out.size(1));
    const TaskExample& e = split.examples[static_cast<size_t>(i)];
    nlohmann::json j{{"index", i}, {"output", output}};
    if (spec.head == HeadKind::regression) {
      j["prediction"] = output[0];
      j["gold"] = e.score;
    } else {
      const auto best = spec.head == HeadKind::triplet
                            ? (output[1] > output[0] ? 1 : 0)
                            : std::max_element(output.begin(), output.end()) - output.begin();
      j["prediction"] =
          spec.head == HeadKind::triplet ? (best == 0 ? "B" : "C") : spec.labels[static_cast<size_t>(best)];
      j["gold"] =
          spec.head == HeadKind::triplet ? (e.label == 0 ? "B" : "C") : spec.labels[static_cast<size_t>(e.label)];
    }
    text += j.dump() + "\n";
  }
  return text;
}

}  // namespace roformer::finetune
