// One optimizer step, separated from the loop so tests can drive it directly: AdamW with
// decay only on matrices (no decay on biases and LayerNorm), accumulation of micro-batches as
// sum-of-losses / scored tokens (so k micro-batches equal one k-times larger batch), the
// global gradient norm checked for finiteness before anything changes, and clipping.
#pragma once

#include <torch/optim/adamw.h>

#include <memory>

#include "roformer/config/config.h"
#include "roformer/data/batches.h"
#include "roformer/dist/reducer.h"
#include "roformer/model/encoder.h"

namespace roformer::train {

// AdamW with two groups: weight decay for parameters with >= 2 dimensions, none otherwise.
std::unique_ptr<torch::optim::AdamW> make_optimizer(model::EncoderModel& model, const config::TrainConfig& train);

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

struct StepResult {
  double loss = 0;       // mean loss over the step's scored tokens
  double grad_norm = 0;  // global L2 norm before clipping
  bool finite = true;    // false: nothing was updated
  bool any_stop = false;  // data parallel: some rank had stop_requested set
};

// Forward/backward over `grad_accum` micro-batches of `batch`, then (if finite) clip and step.
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
StepResult train_step(model::EncoderModel& model, torch::optim::Optimizer& optimizer, const data::Batch& batch,
                      int64_t grad_accum, double grad_clip, const torch::Device& device, bool autocast,
                      bool poison = false, const DataParallel* dp = nullptr);

// Global L2 norm of all gradients (in double).
double gradient_norm(model::EncoderModel& model);

}  // namespace roformer::train
