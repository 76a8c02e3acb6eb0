// How a training run uses its device: the data-parallel engine and the CUDA switches (TF32,
// deterministic kernels) applied before the first kernel runs. (The device itself and the
// threads: model/device.h, shared with evaluation.)
#pragma once

#include <torch/types.h>

#include <string>

#include "roformer/config/config.h"
#include "roformer/dist/process_group.h"

namespace roformer::train {

dist::Engine pick_engine(const config::DistConfig& dist, const torch::Device& device);

// train.tf32 and train.deterministic on CUDA (nothing on the CPU, whose kernels are already
// deterministic). Returns a one-line description for the log.
std::string apply_cuda_switches(const config::TrainConfig& train, const torch::Device& device);

}  // namespace roformer::train
