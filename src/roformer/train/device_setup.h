// Where a run executes and how: the device for this rank, the data-parallel engine, and the
// CUDA switches (TF32, deterministic kernels) applied before the first kernel runs.
#pragma once

#include <torch/types.h>

#include <string>

#include "roformer/config/config.h"
#include "roformer/dist/dist_env.h"
#include "roformer/dist/process_group.h"

namespace roformer::train {

// cpu, or cuda:LOCAL_RANK (auto picks CUDA when a GPU is visible). UserError when the rank has no GPU.
torch::Device pick_device(const config::TrainConfig& train, const dist::DistEnv& env);

dist::Engine pick_engine(const config::DistConfig& dist, const torch::Device& device);

// train.tf32 and train.deterministic on CUDA (nothing on the CPU, whose kernels are already
// deterministic). Returns a one-line description for the log.
std::string apply_cuda_switches(const config::TrainConfig& train, const torch::Device& device);

}  // namespace roformer::train
