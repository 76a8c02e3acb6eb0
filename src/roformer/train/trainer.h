// `roformer train`: builds model and data from a config and trains MLM or causal LM with
// AdamW, warmup + decay, clipping and accumulation; validates periodically; writes the run
// directory (config.yaml, train.log, metrics.jsonl, checkpoints/); resumes exactly. Under
// data parallel every rank trains on its share of each global batch, rank 0 alone writes the
// run directory, and every rank resumes from its checkpoints.
#pragma once

#include <string>

#include "roformer/config/config_loader.h"
#include "roformer/distributed/dist_env.h"
#include "roformer/run/run_end.h"

namespace roformer::train {

// Faults the reliability tests inject. The CLI reads them once from the environment
// (FaultInjection::from_environment); the library never looks at the environment for them.
struct FaultInjection {
  int64_t nan_step = -1;                 // ROFORMER_FAULT_NAN_STEP: that step's loss is NaN
  int64_t kill_in_checkpoint_step = -1;  // ROFORMER_FAULT_KILL_IN_CHECKPOINT: SIGKILL half-way through that save
  int64_t fail_checkpoint_step = -1;     // ROFORMER_FAULT_FULL_DISK_AT=STEP:FILE: that file of that save
  std::string fail_checkpoint_file;      //   fails as on a full disk
  bool skip_rng_restore = false;         // ROFORMER_FAULT_SKIP_RNG_RESTORE: resume without the RNG state
  bool uncapturable_step = false;        // ROFORMER_FAULT_UNCAPTURABLE_STEP: the CUDA-graph capture fails
  int kill_rank = -1;                    // ROFORMER_FAULT_KILL_RANK=RANK:STEP: that rank SIGKILLs itself
  int64_t kill_rank_step = -1;           //   before that step (a peer that vanishes mid-run)
  static FaultInjection from_environment();
};

struct TrainOptions {
  std::string run_dir;  // empty: runs/<config name>
  std::string resume;   // "", "auto" (newest complete checkpoint, if any) or a checkpoint directory
  dist::DistEnv env;    // world_size > 1: data parallel; train.batch_size is the global batch
  FaultInjection faults;
  // Where train.init_from's weights are read when it names a Hugging Face folder: the folder
  // converted for this run (the config keeps the folder's path); empty: train.init_from itself.
  std::string init_weights;
};

struct TrainResult : run::RunEnd {
  double valid_loss = 0;  // last validation loss
};

TrainResult run_training(const config::LoadedConfig& config, const TrainOptions& options);

}  // namespace roformer::train
