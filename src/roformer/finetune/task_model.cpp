// The fine-tuned model and its batches (see task_model.h).
#include "roformer/finetune/task_model.h"

#include <torch/torch.h>

#include <algorithm>

namespace roformer::finetune {

TaskInputs collate(const std::vector<const EncodedInput*>& rows, int64_t pad_id, const torch::Device& device) {
  size_t longest = 0;
  for (const EncodedInput* r : rows) longest = std::max(longest, r->ids.size());
  const auto n = static_cast<int64_t>(rows.size()), s = static_cast<int64_t>(longest);
  torch::Tensor ids = torch::full({n, s}, pad_id, torch::kLong);
  torch::Tensor types = torch::zeros({n, s}, torch::kLong);
  torch::Tensor mask = torch::zeros({n, s}, torch::kLong);
  auto pi = ids.accessor<int64_t, 2>(), pt = types.accessor<int64_t, 2>(), pm = mask.accessor<int64_t, 2>();
  for (int64_t i = 0; i < n; ++i) {
    const EncodedInput& r = *rows[static_cast<size_t>(i)];
    for (size_t j = 0; j < r.ids.size(); ++j) {
      const auto k = static_cast<int64_t>(j);
      pi[i][k] = r.ids[j];
      pt[i][k] = r.token_types[j];
      pm[i][k] = 1;
    }
  }
  return {ids.to(device), mask.to(device), types.to(device)};
}

TaskInputs collate_examples(const std::vector<const TaskExample*>& examples, int64_t pad_id,
                            const torch::Device& device) {
  std::vector<const EncodedInput*> rows;
  const size_t per = examples.empty() ? 0 : examples.front()->inputs.size();
  for (size_t k = 0; k < per; ++k)
    for (const TaskExample* e : examples) rows.push_back(&e->inputs[k]);
  return collate(rows, pad_id, device);
}

TaskTargets targets_of(const std::vector<const TaskExample*>& examples, const torch::Device& device) {
  std::vector<int64_t> labels;
  std::vector<double> scores;
  for (const TaskExample* e : examples) {
    labels.push_back(e->label);
    scores.push_back(e->score);
  }
  return {torch::tensor(labels, torch::kLong).to(device), torch::tensor(scores, torch::kFloat64).to(device)};
}

TaskModelImpl::TaskModelImpl(const config::ModelConfig& model, const TaskSpec& spec, double classifier_dropout,
                             uint64_t seed, int64_t checkpoint_every)
    : spec_(spec), causal_(model.objective == config::Objective::causal_lm) {
  roformer = register_module("roformer", model::build_model(model, seed, checkpoint_every));
  torch::manual_seed(seed + 7);  // the head's own stream: the same head whatever the encoder
  classifier = register_module(
      "classifier", ClassificationHead(model.hidden_size, spec.num_labels, classifier_dropout, model.activation));
  {
    torch::NoGradGuard no_grad;
    for (auto* lin : {&classifier->dense, &classifier->out_proj}) {  // BERT/HF initialisation
      (*lin)->weight.normal_(0.0, model.init_std);
      (*lin)->bias.zero_();
    }
  }
  // What the task never uses is frozen (no gradient, no update, no data-parallel reduction):
  // the pretraining LM head's own parameters, and the head of a bi-encoder.
  for (auto& p : roformer->cls->named_parameters()) p.value().set_requires_grad(false);
  if (spec.bi_encoder)
    for (auto& p : classifier->parameters()) p.set_requires_grad(false);
}

torch::Tensor TaskModelImpl::forward(const TaskInputs& in) {
  torch::Tensor hidden = roformer->forward({in.ids, in.mask, in.types});  // [R, S, H]
  if (causal_) {                                                          // the last real token of each row
    const torch::Tensor last = (in.mask.sum(1) - 1).clamp_min(0);
    hidden = hidden.gather(1, last.view({-1, 1, 1}).expand({-1, 1, hidden.size(2)}));
  }
  torch::Tensor out = classifier->forward(hidden);
  return out.scalar_type() == torch::kFloat64 ? out : out.to(torch::kFloat32);
}

torch::Tensor TaskModelImpl::pooled(const TaskInputs& in) {
  const torch::Tensor hidden = roformer->forward({in.ids, in.mask, in.types});  // [R, S, H]
  const auto dtype = hidden.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const torch::Tensor keep = in.mask.unsqueeze(-1).to(dtype);            // [R, S, 1]
  return (hidden.to(dtype) * keep).sum(1) / keep.sum(1).clamp_min(1.0);  // [R, H]
}

torch::Tensor TaskModelImpl::example_outputs(const TaskInputs& in, int64_t examples) {
  if (spec_.bi_encoder) {  // rows A..., B..., C...: scale * cos(A, B), scale * cos(A, C)
    const torch::Tensor p =
        torch::nn::functional::normalize(pooled(in), torch::nn::functional::NormalizeFuncOptions().dim(1));
    const torch::Tensor a = p.narrow(0, 0, examples), b = p.narrow(0, examples, examples),
                        c = p.narrow(0, 2 * examples, examples);
    return torch::stack({(a * b).sum(1), (a * c).sum(1)}, 1) * spec_.scale;
  }
  const torch::Tensor out = forward(in);
  if (spec_.head == HeadKind::classification) return out;
  const torch::Tensor s = out.squeeze(-1);
  if (spec_.head == HeadKind::regression) return s;
  return s.view({2, examples}).t();  // rows (A,B) then (A,C) -> [B, 2]
}

torch::Tensor TaskModelImpl::loss(const TaskInputs& in, const TaskTargets& gold, const config::FinetuneConfig& f) {
  return task_loss(spec_, example_outputs(in, gold.labels.size(0)), gold, f);
}

torch::Tensor task_loss(const TaskSpec& spec, const torch::Tensor& out, const TaskTargets& gold,
                        const config::FinetuneConfig& f) {
  switch (spec.head) {
    case HeadKind::classification:
      return classification_loss(out, gold.labels);
    case HeadKind::regression:
      return regression_loss(out.unsqueeze(-1), gold.scores);
    case HeadKind::triplet:
      return triplet_loss(
          out.select(1, 0), out.select(1, 1), gold.labels == 0,
          f.triplet_loss == config::TripletLossKind::softmax ? TripletLoss::softmax : TripletLoss::margin,
          f.triplet_margin);
  }
  return {};
}

}  // namespace roformer::finetune
