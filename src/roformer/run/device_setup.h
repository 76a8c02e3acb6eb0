// How a training run uses its device: the data-parallel engine, process group and gradient
// reducer (shared by pretraining and fine-tuning), and the CUDA switches (TF32, deterministic
// kernels) applied before the first kernel runs. (The device itself and the threads:
// runtime/device.h, shared with evaluation.)
#pragma once

#include <torch/types.h>

#include <memory>
#include <string>

#include "roformer/config/config.h"
#include "roformer/distributed/process_group.h"
#include "roformer/distributed/reducer.h"

namespace torch::nn {
class Module;
}

namespace roformer::run {

dist::Engine pick_engine(const config::DistConfig& dist, const torch::Device& device);

// The process group of a multi-process run: rendezvous per `env`, Gloo or NCCL per
// dist.backend and the device, dist.timeout_s.
std::unique_ptr<dist::ProcessGroup> open_process_group(const dist::DistEnv& env, const config::DistConfig& dist,
                                                       const torch::Device& device);

// The gradient reducer over `module`'s parameters (frozen ones are skipped), with the bucket
// sizes of dist.first_bucket_mb / dist.bucket_mb.
std::unique_ptr<dist::GradientReducer> make_reducer(torch::nn::Module& module, dist::Communicator& comm,
                                                    const config::DistConfig& dist);

// train.tf32 and train.deterministic on CUDA (nothing on the CPU, whose kernels are already
// deterministic). Returns a one-line description for the log.
std::string apply_cuda_switches(const config::TrainConfig& train, const torch::Device& device);

}  // namespace roformer::run
