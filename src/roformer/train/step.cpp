// Optimizer construction and the training step (see step.h).
#include "roformer/train/step.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

namespace roformer::train {
namespace {

// bf16 autocast on CUDA for the forward pass (RAII); a no-op when disabled.
class AutocastGuard {
 public:
  explicit AutocastGuard(bool enabled) : enabled_(enabled) {
    if (!enabled_) return;
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(at::kCUDA, false);
  }

 private:
  bool enabled_;
};

}  // namespace

std::unique_ptr<torch::optim::AdamW> make_optimizer(model::EncoderModel& model, const config::TrainConfig& t) {
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& p : model->named_parameters()) (p.value().dim() >= 2 ? decay : no_decay).push_back(p.value());
  auto options = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(t.lr).betas({t.beta1, t.beta2}).eps(t.eps).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, options(t.weight_decay));
  groups.emplace_back(no_decay, options(0.0));
  return std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(t.lr));
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& g : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
}

double gradient_norm(model::EncoderModel& model) {
  double sq = 0;
  for (const auto& p : model->parameters())
    if (p.grad().defined()) sq += p.grad().to(torch::kFloat64).pow(2).sum().item<double>();
  return std::sqrt(sq);
}

StepResult train_step(model::EncoderModel& model, torch::optim::Optimizer& optimizer, const data::Batch& batch,
                      int64_t grad_accum, double grad_clip, const torch::Device& device, bool autocast, bool poison,
                      const DataParallel* dp) {
  StepResult r;
  optimizer.zero_grad();
  const int64_t micro = batch.input_ids.size(0) / grad_accum;
  const torch::Device comm_device = model->parameters().front().device();
  double scored = static_cast<double>(batch.scored);
  double world = 1;
  if (dp) {  // the global count of scored tokens
    torch::Tensor n = torch::full({1}, scored, torch::TensorOptions().dtype(torch::kFloat64).device(comm_device));
    dp->comm->allreduce_sum_now(n);
    scored = n.item<double>();
    world = dp->comm->size();
  }
  for (int64_t m = 0; m < grad_accum; ++m) {
    const torch::Tensor targets = batch.targets.narrow(0, m * micro, micro).to(device);
    // Single process: skip a micro-batch with nothing scored. Data parallel: every rank must
    // run the same backward passes (the collectives pair up), so none is skipped.
    if (!dp && (targets != -100).sum().item<int64_t>() == 0) continue;
    const torch::Tensor ids = batch.input_ids.narrow(0, m * micro, micro).to(device);
    torch::Tensor loss;
    {
      AutocastGuard guard(autocast);
      loss = model->loss({ids}, targets, /*sum=*/true) / scored;
    }
    if (poison) loss = loss * std::numeric_limits<double>::quiet_NaN();
    r.loss += loss.item<double>();
    if (!dp) {
      loss.backward();
      continue;
    }
    // The reducer divides by the world size; scaling by it here makes the result the global mean.
    const bool last = m == grad_accum - 1;
    if (last) {
      dp->reducer->prepare_for_backward();
      (loss * world).backward();
      dp->reducer->finish();
    } else {
      auto no_sync = dp->reducer->no_sync();
      (loss * world).backward();
    }
  }
  if (dp) {  // one reduction: the global loss and whether any rank wants to stop
    torch::Tensor l = torch::tensor({r.loss, dp->stop_requested ? 1.0 : 0.0}, torch::kFloat64).to(comm_device);
    dp->comm->allreduce_sum_now(l);
    l = l.cpu();
    r.loss = l[0].item<double>();
    r.any_stop = l[1].item<double>() > 0;
  }
  r.grad_norm = gradient_norm(model);
  r.finite = std::isfinite(r.loss) && std::isfinite(r.grad_norm);
  if (!r.finite) {
    optimizer.zero_grad();
    return r;
  }
  if (grad_clip > 0 && r.grad_norm > grad_clip) {
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters())
      if (p.grad().defined()) p.grad().mul_(grad_clip / (r.grad_norm + 1e-6));
  }
  optimizer.step();
  return r;
}

}  // namespace roformer::train
