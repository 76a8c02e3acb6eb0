// What one optimizer step reports to the run around it (train/step.h makes it; the run lifecycle
// records it and decides on stopping from it), and the device-side count of non-finite steps the
// non-finite policy reads.
#pragma once

#include <torch/types.h>

#include <cstdint>

namespace roformer::run {

// Device tensors: reading one (the *_value accessors) waits for the step to finish, so the
// trainer reads them only at log, evaluation and checkpoint steps.
struct StepResult {
  torch::Tensor loss;       // float64 []: mean loss over the step's scored tokens
  torch::Tensor grad_norm;  // float64 []: global L2 norm before clipping
  torch::Tensor found_inf;  // float32 []: 1 when the loss or the norm is non-finite (nothing updated)
  bool any_stop = false;    // data parallel: some rank had stop_requested set

  double loss_value() const { return loss.item<double>(); }
  double grad_norm_value() const { return grad_norm.item<double>(); }
  bool finite() const { return found_inf.item<float>() == 0; }
};

// Non-finite steps counted on the device, so the step never waits for the host:
// [count, first such step, whether that step's loss (1) or only its norm (0) was non-finite].
class NonFiniteWatch {
 public:
  explicit NonFiniteWatch(const torch::Device& device);
  void record(const StepResult& r, int64_t step);
  struct Seen {
    int64_t count = 0, first_step = -1;
    bool first_was_loss = false;
  };
  Seen read() const;  // a host sync: for log, evaluation and checkpoint steps

 private:
  torch::Tensor state_;  // float64 [3] on the training device
};

}  // namespace roformer::run
