// The phases every run shares, training and fine-tuning alike, written once: the ranks agreeing
// on the checkpoint to resume from, and a checkpoint save that, when the disk is full, says
// what survived and how to continue. Trainer and Finetuner call these instead of keeping copies.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <string>

#include "roformer/dist/dist_env.h"
#include "roformer/dist/process_group.h"
#include "roformer/io/checkpoint.h"

namespace roformer::train {

// Every rank resumes from rank 0's choice of checkpoint, which must exist on this rank too (a
// multi-node run needs the run directory on a shared filesystem); returns that checkpoint.
std::string agree_on_resume(dist::ProcessGroup& group, const dist::DistEnv& env, const std::string& resume_dir);

// io::save_checkpoint, and on failure (a full disk, no permission) a UserError that adds which
// step stopped, which earlier checkpoint is intact, and how to continue (`what` is "training"
// or "fine-tuning").
void save_checkpoint_or_explain(const std::string& what, const std::string& run_dir, torch::nn::Module& model,
                                torch::optim::Optimizer& optimizer, const io::TrainerState& state,
                                const config::Config& config, const std::string& git_revision, int64_t keep_last,
                                const io::CheckpointFaults& faults = {});

}  // namespace roformer::train
