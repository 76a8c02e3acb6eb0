// One optimizer step, separated from the loop so tests can drive it directly: AdamW (fused,
// decay only on matrices), accumulation of micro-batches as sum-of-losses / scored tokens (so
// k micro-batches equal one k-times larger batch), the global gradient norm, clipping and the
// non-finite guard -- all on the device, so a single-process step never waits for the GPU.
#pragma once

#include <torch/optim/optimizer.h>

#include <memory>

#include "roformer/config/config.h"
#include "roformer/data/batches.h"
#include "roformer/distributed/reducer.h"
#include "roformer/model/encoder.h"
#include "roformer/run/step_result.h"
#include "roformer/train/fused_adamw.h"

namespace roformer::train {

// AdamW with two groups: weight decay for parameters with >= 2 dimensions, none otherwise.
std::unique_ptr<FusedAdamW> make_optimizer(torch::nn::Module& module, const config::TrainConfig& train);
inline std::unique_ptr<FusedAdamW> make_optimizer(model::EncoderModel& model, const config::TrainConfig& train) {
  return make_optimizer(*model, train);
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

// Forward/backward over `grad_accum` micro-batches of `batch`, then clip and step; a
// non-finite loss or norm skips the update on the device (FusedAdamW's found_inf; any other
// optimizer is stepped only after the host has checked the flag).
// `poison` multiplies the loss by NaN (fault injection for tests of the guard).
// Data parallel (`dp` set): `batch` is this rank's share of the global batch; the loss is
// normalised by the global number of scored tokens, the first grad_accum-1 micro-batches run
// under no_sync, the reducer averages gradients over ranks, and the returned loss is global,
// so every rank takes the same decisions (finite or not, clipping) on identical gradients.
// `stop_requested` rides along with the loss reduction, so ranks agree on stopping for free.
struct DataParallel {
  dist::GradientReducer* reducer = nullptr;
  dist::Communicator* comm = nullptr;
  bool stop_requested = false;
};
run::StepResult train_step(model::EncoderModel& model, torch::optim::Optimizer& optimizer, const data::Batch& batch,
                           int64_t grad_accum, double grad_clip, const torch::Device& device, bool autocast,
                           bool poison = false, const DataParallel* dp = nullptr);

// One micro-batch on the device. scored_index [N] / gold [N] (optional) may be padded to a
// fixed capacity with gold -100 (a CUDA graph's static buffers); ids/targets are [b, L].
struct MicroBatch {
  torch::Tensor ids, targets, scored_index, gold;
  torch::Tensor positions;  // [rows, L] or undefined (0..L-1)
  torch::Tensor segments;   // [rows, L]: packed documents (data.packing documents), or undefined
  torch::Tensor key_keep;   // [rows, L]: 1 = token, 0 = padding (data.packing none), or undefined
};

// The device part of a step, which a CUDA graph captures whole: forward/backward over the
// micro-batches (loss sums divided by `scored`, a float64 [] device tensor holding the
// scored-token count, or NaN to poison the step), the gradient norm, clipping and the
// update guarded by the non-finite flag. No host reads in a single process.
run::StepResult device_step(model::EncoderModel& model, torch::optim::Optimizer& optimizer,
                            const std::vector<MicroBatch>& micro, const torch::Tensor& scored, double grad_clip,
                            bool autocast, const DataParallel* dp = nullptr);

// The end of every step, once the gradients are in place and r.loss holds the step's loss:
// the global gradient norm, clipping and the update, skipped on the device when the loss or
// the norm is non-finite (r.found_inf). Fine-tuning steps share it with device_step.
run::StepResult update_from_gradients(torch::nn::Module& module, torch::optim::Optimizer& optimizer, run::StepResult r,
                                      double grad_clip);

// Global L2 norm of all gradients: float64 [] on the gradients' device (no host sync).
torch::Tensor gradient_norm(torch::nn::Module& module);
inline torch::Tensor gradient_norm(model::EncoderModel& model) {
  return gradient_norm(*model);
}

// A CPU tensor on `device` without blocking the host (pinned staging on CUDA).
torch::Tensor to_device_async(const torch::Tensor& cpu, const torch::Device& device);

}  // namespace roformer::train
