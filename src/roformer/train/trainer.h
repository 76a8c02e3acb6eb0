// `roformer train`: builds model and data from a config and trains MLM or causal LM with
// AdamW, warmup + decay, clipping and accumulation; validates periodically; writes the run
// directory (config.yaml, train.log, metrics.jsonl, checkpoints/); resumes exactly.
#pragma once

#include <string>

#include "roformer/config/config_loader.h"

namespace roformer::train {

struct TrainOptions {
  std::string run_dir;  // empty: runs/<config name>
  std::string resume;   // "", "auto" (newest complete checkpoint, if any) or a checkpoint directory
};

struct TrainResult {
  int exit_code = 0;       // 0 done; 130/143 stopped by SIGINT/SIGTERM (checkpoint saved); 3 non-finite stop
  int64_t step = 0;        // optimizer steps completed
  double valid_loss = 0;   // last validation loss
  std::string run_dir;
};

// Exit code when training stops on a non-finite loss or gradient norm.
constexpr int kNonFiniteExitCode = 3;

TrainResult run_training(const config::LoadedConfig& config, const TrainOptions& options);

}  // namespace roformer::train
