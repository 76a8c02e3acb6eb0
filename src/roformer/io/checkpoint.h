// Checkpoints: RUN/checkpoints/step_N/ with model.safetensors (weights), trainer.pt
// (optimizer state, CPU and CUDA RNG states, step), config.yaml (resolved) and meta.json, written into a
// temporary directory and renamed into place when complete, so a crash never leaves a
// checkpoint that looks complete. Loading refuses an architecture that differs, naming the key.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "roformer/config/config.h"

namespace roformer::io {

struct CheckpointInfo {
  std::string dir;
  int64_t step = 0;
};

// Newest complete checkpoint under run_dir/checkpoints (incomplete temporaries are ignored).
std::optional<CheckpointInfo> latest_checkpoint(const std::string& run_dir);

// A path given where a checkpoint is expected (eval, finetune, convert, forward): a run
// directory with complete checkpoints stands for its newest one (logged, naming `command`);
// anything else is returned as given, for the loader's own checks. A run directory whose
// checkpoints are all incomplete is a UserError.
std::string checkpoint_argument(const std::string& path, const std::string& command);

// Whether `dir` is a complete checkpoint (all four files, meta.json says complete).
bool is_complete_checkpoint(const std::string& dir);

// All complete checkpoints, oldest first.
std::vector<CheckpointInfo> list_checkpoints(const std::string& run_dir);

// Every step_N directory under run_dir/checkpoints, complete or not (sorted by name).
std::vector<std::string> checkpoint_dirs(const std::string& run_dir);

struct TrainerState {
  int64_t step = 0;  // optimizer steps completed
  int64_t tokens_seen = 0;
  double elapsed_s = 0;  // training time before this session
  // Fine-tuning: the epoch in progress, so its mean training loss survives a resume mid-epoch.
  double epoch_loss_sum = 0;
  int64_t epoch_steps = 0;
  // train.until_learned: the step whose validation reached the threshold (the run is complete); -1: not learned.
  int64_t learned_step = -1;
};

// Fault injection for the reliability tests: at the save of step `kill_at_step`, SIGKILL this
// process half-way through; at the save of step `fail_at_step`, writing the file `fail_file`
// fails as a full disk does (the same UserError the writers raise on ENOSPC).
struct CheckpointFaults {
  int64_t kill_at_step = -1;
  int64_t fail_at_step = -1;
  std::string fail_file;  // model.safetensors, trainer.pt, config.yaml or meta.json
};

void save_checkpoint(const std::string& run_dir, torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                     const TrainerState& state, const config::Config& config, const std::string& git_revision,
                     int64_t keep_last, const CheckpointFaults& faults = {});

// The intra-op thread count of the run that saved the checkpoint (meta.json), absent in
// checkpoints written before it was kept. LibTorch's CPU reductions split their work by the
// thread count, so a resume on another count is not bitwise the uninterrupted run.
std::optional<int> checkpoint_intra_op_threads(const std::string& dir);

// The optimizer steps a checkpoint had taken (its meta.json), if it records them.
std::optional<int64_t> checkpoint_step(const std::string& dir);

// Reads a checkpoint directory's resolved config (config.yaml).
config::Config checkpoint_config(const std::string& dir);

// The first architecture key (model.*, less dropout, init and RoPE's runtime choices) whose
// value differs between a saved config and the current one.
struct ArchitectureDifference {
  std::string key, saved, current;
};
std::optional<ArchitectureDifference> first_architecture_difference(const config::Config& saved,
                                                                    const config::Config& current);

// Throws UserError naming the first architecture key whose value differs.
void check_same_architecture(const config::Config& saved, const config::Config& current, const std::string& where);

// Loads weights (strict: every parameter present with its shape) into `model`.
// `may_be_missing`: names the checkpoint may lack (they keep the model's values; DroPE's added QK-norm).
void load_model_weights(const std::string& checkpoint_dir, torch::nn::Module& model,
                        const std::function<bool(const std::string&)>& may_be_missing = {});

// Loads weights, optimizer state and (unless restore_rng is false: the negative control of the
// resume test) the CPU and CUDA RNG states; returns the trainer state.
TrainerState load_checkpoint(const std::string& checkpoint_dir, torch::nn::Module& model,
                             torch::optim::Optimizer& optimizer, bool restore_rng = true);

}  // namespace roformer::io
