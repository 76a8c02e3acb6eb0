// AdamW through ATen's fused multi-tensor kernel (`_fused_adamw_`, CPU and CUDA): one launch
// per parameter group instead of a dozen per tensor, and a device-side `found_inf` flag that
// skips the update without the host reading anything (as AMP's gradient scaler does). It is
// a torch::optim::AdamW underneath, so checkpoints keep the exact same trainer.pt layout.
#pragma once

#include <torch/optim/adamw.h>

namespace roformer::train {

class FusedAdamW : public torch::optim::AdamW {
 public:
  FusedAdamW(const std::vector<torch::optim::OptimizerParamGroup>& groups, torch::optim::AdamWOptions defaults);

  // One update of every parameter with a gradient. With a found_inf flag set (float32 [] on the
  // parameters' device), a flag of 1 leaves parameters, moments and the step count unchanged.
  torch::Tensor step(LossClosure closure = nullptr) override;
  void set_found_inf(const torch::Tensor& flag) { found_inf_ = flag; }

  // The learning rate as a device tensor (float32 []), read by the kernel at run time, so a
  // captured CUDA graph sees each step's value; undefined: the groups' host lr is used.
  void set_lr_tensor(const torch::Tensor& lr) { lr_tensor_ = lr; }

  // Updates completed (reads the device counter: a sync on CUDA; for logging and saving).
  int64_t completed_steps() const;

  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

 private:
  void init_state();          // moments and the shared step counter on first use, on the params' device
  torch::Tensor step_count_;  // float32 [] on the params' device: completed updates
  torch::Tensor found_inf_;   // float32 [] or undefined
  torch::Tensor lr_tensor_;   // float32 [] or undefined
};

}  // namespace roformer::train
