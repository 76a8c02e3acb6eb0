// The device-side count of non-finite steps (see step_result.h).
#include "roformer/run/step_result.h"

#include <torch/torch.h>

namespace roformer::run {

NonFiniteWatch::NonFiniteWatch(const torch::Device& device)
    : state_(torch::tensor({0.0, -1.0, 0.0}, torch::kFloat64).to(device)) {}

void NonFiniteWatch::record(const StepResult& r, int64_t step) {
  const torch::Tensor bad = r.found_inf.to(torch::kFloat64);
  const torch::Tensor first = (state_[1] < 0).to(torch::kFloat64) * bad;  // 1 at the first bad step only
  const torch::Tensor loss_bad = torch::logical_not(torch::isfinite(r.loss)).to(torch::kFloat64);
  state_.add_(torch::stack({bad, first * static_cast<double>(step + 1), first * loss_bad}));
}

NonFiniteWatch::Seen NonFiniteWatch::read() const {
  const torch::Tensor h = state_.cpu();
  const double* d = h.data_ptr<double>();
  return {static_cast<int64_t>(d[0]), static_cast<int64_t>(d[1]), d[2] > 0};
}

}  // namespace roformer::run
