// FusedAdamW (see fused_adamw.h). The moments live in torch::optim::AdamW's own state map
// (keyed by TensorImpl, as LibTorch's AdamW keys it), so save/load write the same archive.
// Every parameter shares one step counter: all of them step together.
#include "roformer/train/fused_adamw.h"

#include <ATen/ATen.h>
#include <torch/serialize/archive.h>

namespace roformer::train {
namespace {

using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;

}  // namespace

FusedAdamW::FusedAdamW(const std::vector<torch::optim::OptimizerParamGroup>& groups, AdamWOptions defaults)
    : torch::optim::AdamW(groups, std::move(defaults)) {}

void FusedAdamW::init_state() {
  int64_t restored_step = -1;
  for (auto& group : param_groups_) {
    for (auto& p : group.params()) {
      auto it = state_.find(p.unsafeGetTensorImpl());
      if (it == state_.end()) {
        auto s = std::make_unique<AdamWParamState>();
        s->exp_avg(torch::zeros_like(p, at::MemoryFormat::Preserve));
        s->exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Preserve));
        state_[p.unsafeGetTensorImpl()] = std::move(s);
        continue;
      }
      auto& s = static_cast<AdamWParamState&>(*it->second);
      TORCH_CHECK(s.exp_avg().sizes() == p.sizes() && s.exp_avg_sq().sizes() == p.sizes(),
                  "FusedAdamW: a saved moment of shape ", s.exp_avg().sizes(), " belongs to a parameter of shape ",
                  p.sizes());
      TORCH_CHECK(restored_step < 0 || restored_step == s.step(),
                  "FusedAdamW: parameters were saved at different step counts (", restored_step, " and ", s.step(),
                  ")");
      restored_step = s.step();
      // A checkpoint loads its moments where they were saved; they belong next to the parameter.
      if (s.exp_avg().device() != p.device()) s.exp_avg(s.exp_avg().to(p.device()));
      if (s.exp_avg_sq().device() != p.device()) s.exp_avg_sq(s.exp_avg_sq().to(p.device()));
    }
  }
  const at::Device device = param_groups_.front().params().front().device();
  step_count_ = torch::full({}, static_cast<double>(std::max<int64_t>(restored_step, 0)),
                            torch::TensorOptions().dtype(torch::kFloat32).device(device));
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  if (!step_count_.defined()) init_state();
  // Counted before the kernel reads it (bias correction uses the new count); a skipped step adds 0.
  if (found_inf_.defined()) {
    step_count_.sub_(found_inf_).add_(1.0);
  } else {
    step_count_.add_(1.0);
  }
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const AdamWOptions&>(group.options());
    TORCH_CHECK(!o.amsgrad(), "FusedAdamW: amsgrad is not supported");
    std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& s = static_cast<AdamWParamState&>(*state_.at(p.unsafeGetTensorImpl()));
      params.push_back(p);
      grads.push_back(p.grad());
      exp_avgs.push_back(s.exp_avg());
      exp_avg_sqs.push_back(s.exp_avg_sq());
      steps.push_back(step_count_);
    }
    if (params.empty()) continue;
    const auto [beta1, beta2] = o.betas();
    const std::optional<at::Tensor> found = found_inf_.defined() ? std::optional<at::Tensor>(found_inf_) : std::nullopt;
    if (lr_tensor_.defined()) {
      at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, {}, steps, lr_tensor_, beta1, beta2, o.weight_decay(),
                        o.eps(), /*amsgrad=*/false, /*maximize=*/false, std::nullopt, found);
    } else {
      at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, {}, steps, o.lr(), beta1, beta2, o.weight_decay(),
                        o.eps(), /*amsgrad=*/false, /*maximize=*/false, std::nullopt, found);
    }
  }
  return loss;
}

int64_t FusedAdamW::completed_steps() const {
  return step_count_.defined() ? static_cast<int64_t>(step_count_.item<float>()) : 0;
}

void FusedAdamW::save(torch::serialize::OutputArchive& archive) const {
  // The per-parameter step of LibTorch's AdamW state, from the shared device counter.
  const int64_t n = completed_steps();
  for (const auto& entry : state_) static_cast<AdamWParamState&>(*entry.second).step(n);
  torch::optim::AdamW::save(archive);
}

void FusedAdamW::load(torch::serialize::InputArchive& archive) {
  torch::optim::AdamW::load(archive);
  step_count_ = torch::Tensor();
  init_state();
}

}  // namespace roformer::train
