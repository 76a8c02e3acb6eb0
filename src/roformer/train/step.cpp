// Optimizer construction and the training step (see step.h). Nothing here reads a device
// value on the host in a single-process step: the loss, norm, clipping factor and non-finite
// flag stay tensors, and batches reach the GPU through pinned, non-blocking copies.
#include "roformer/train/step.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "roformer/common/autocast.h"

namespace roformer::train {
namespace {

std::vector<torch::Tensor> defined_grads(torch::nn::Module& module) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : module.parameters())
    if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

// The global count of scored tokens over ranks (data parallel; one small collective).
double global_scored(const DataParallel& dp, double local, const torch::Device& comm_device) {
  torch::Tensor n = torch::full({1}, local, torch::TensorOptions().dtype(torch::kFloat64).device(comm_device));
  dp.comm->allreduce_sum_now(n);
  return n.item<double>();
}

}  // namespace

std::unique_ptr<FusedAdamW> make_optimizer(torch::nn::Module& module, const config::TrainConfig& t) {
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& p : module.named_parameters()) (p.value().dim() >= 2 ? decay : no_decay).push_back(p.value());
  auto options = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(t.lr).betas({t.beta1, t.beta2}).eps(t.eps).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, options(t.weight_decay));
  groups.emplace_back(no_decay, options(0.0));
  return std::make_unique<FusedAdamW>(groups, torch::optim::AdamWOptions(t.lr));
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& g : optimizer.param_groups()) g.options().set_lr(lr);
}

namespace {

// One foreach launch for the per-tensor norms, then one stack and one cast (not one per tensor).
torch::Tensor norm_of(const std::vector<torch::Tensor>& grads) {
  if (grads.empty()) return torch::zeros({}, torch::kFloat64);
  return torch::stack(at::_foreach_norm(grads, 2)).to(torch::kFloat64).pow(2).sum().sqrt();
}

}  // namespace

torch::Tensor gradient_norm(torch::nn::Module& module) {
  return norm_of(defined_grads(module));
}

torch::Tensor to_device_async(const torch::Tensor& cpu, const torch::Device& device) {
  if (device.is_cpu()) return cpu;
  return cpu.pin_memory().to(device, /*non_blocking=*/true);
}

run::StepResult train_step(model::EncoderModel& model, torch::optim::Optimizer& optimizer, const data::Batch& batch,
                           int64_t grad_accum, double grad_clip, const torch::Device& device, bool autocast,
                           bool poison, const DataParallel* dp) {
  optimizer.zero_grad();
  const int64_t rows = batch.input_ids.size(0) / grad_accum;
  const torch::Device comm_device = model->parameters().front().device();
  const double scored =
      dp ? global_scored(*dp, static_cast<double>(batch.scored), comm_device) : static_cast<double>(batch.scored);
  std::vector<MicroBatch> micro;
  for (int64_t m = 0; m < grad_accum; ++m) {
    const torch::Tensor targets_cpu = batch.targets.narrow(0, m * rows, rows);
    const torch::Tensor scored_cpu = (targets_cpu.reshape({-1}) != -100).nonzero().squeeze(1);  // [N], on the host
    // Single process: skip a micro-batch with nothing scored. Data parallel: every rank must
    // run the same backward passes (the collectives pair up), so none is skipped.
    if (!dp && scored_cpu.numel() == 0) continue;
    auto rows_of = [&](const torch::Tensor& t) {  // this micro-batch's rows on the device, or undefined
      return t.defined() ? to_device_async(t.narrow(0, m * rows, rows), device) : torch::Tensor();
    };
    micro.push_back({rows_of(batch.input_ids),
                     to_device_async(targets_cpu, device),
                     to_device_async(scored_cpu, device),
                     {},
                     rows_of(batch.positions),
                     rows_of(batch.segments),
                     rows_of(batch.key_keep)});
  }
  const torch::Tensor count = torch::full({}, poison ? std::numeric_limits<double>::quiet_NaN() : scored,
                                          torch::TensorOptions().dtype(torch::kFloat64).device(comm_device));
  return device_step(model, optimizer, micro, count, grad_clip, autocast, dp);
}

run::StepResult device_step(model::EncoderModel& model, torch::optim::Optimizer& optimizer,
                            const std::vector<MicroBatch>& micro, const torch::Tensor& scored, double grad_clip,
                            bool autocast, const DataParallel* dp) {
  const double world = dp ? dp->comm->size() : 1;
  run::StepResult r;
  r.loss = torch::zeros({}, scored.options());
  for (size_t m = 0; m < micro.size(); ++m) {
    const MicroBatch& mb = micro[m];
    torch::Tensor loss;
    {
      AutocastGuard guard(autocast);
      loss = model->loss({mb.ids, mb.key_keep, {}, mb.positions, mb.segments}, mb.targets, /*sum=*/true,
                         mb.scored_index, mb.gold) /
             scored;
    }
    r.loss.add_(loss.detach().to(torch::kFloat64));
    if (!dp) {
      loss.backward();
      continue;
    }
    // The reducer divides by the world size; scaling by it here makes the result the global mean.
    if (m + 1 == micro.size()) {
      dp->reducer->prepare_for_backward();
      (loss * world).backward();
      dp->reducer->finish();
    } else {
      auto no_sync = dp->reducer->no_sync();
      (loss * world).backward();
    }
  }
  if (dp) {  // one reduction: the global loss and whether any rank wants to stop
    torch::Tensor l = torch::stack({r.loss, torch::full({}, dp->stop_requested ? 1.0 : 0.0, r.loss.options())});
    dp->comm->allreduce_sum_now(l);
    r.loss = l[0];
    r.any_stop = l[1].item<double>() > 0;
  }
  return update_from_gradients(*model, optimizer, std::move(r), grad_clip);
}

run::StepResult update_from_gradients(torch::nn::Module& module, torch::optim::Optimizer& optimizer, run::StepResult r,
                                      double grad_clip) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads = defined_grads(module);
  r.grad_norm = norm_of(grads).to(r.loss.device());
  r.found_inf = torch::logical_not(torch::isfinite(r.loss) & torch::isfinite(r.grad_norm)).to(torch::kFloat32);
  if (grad_clip > 0 && !grads.empty())  // scale by min(1, clip / norm) on the device
    at::_foreach_mul_(grads, (grad_clip / (r.grad_norm + 1e-6)).clamp_max(1.0).to(grads.front().scalar_type()));
  if (auto* fused = dynamic_cast<FusedAdamW*>(&optimizer)) {
    fused->set_found_inf(r.found_inf);
    fused->step();
  } else if (r.finite()) {  // another optimizer (tests use SGD): checked on the host
    optimizer.step();
  }
  return r;
}

}  // namespace roformer::train
