// `roformer finetune CHECKPOINT TASK.yaml`: a pretrained encoder plus a task head, trained
// over the task's training split for finetune.epochs with the pretraining loop's parts (AdamW
// without decay on 1-D parameters, warm-up and decay, clipping, the non-finite guard, bf16
// autocast on CUDA, data parallel over Gloo/NCCL, exact resume), evaluated on the dev split
// after every epoch and on the test split (when present) at the end. The run directory holds
// config.yaml, train.log, metrics.jsonl, checkpoints/ and results.{json,md}.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "roformer/config/config_loader.h"
#include "roformer/distributed/dist_env.h"
#include "roformer/run/run_end.h"

namespace roformer::finetune {

// The run's config: the checkpoint's resolved config, then the task file, then --set. The
// task file may change dropout and any train.* / eval.* / finetune.* key, not the architecture.
config::LoadedConfig finetune_config(const std::string& checkpoint, const std::string& task_file,
                                     const std::vector<std::string>& overrides);

struct FinetuneOptions {
  std::string checkpoint;  // pretrained encoder: a checkpoint directory (ours or converted from HF)
  std::string run_dir;     // empty: runs/<name>
  std::string resume;      // "", "auto" or a fine-tuning checkpoint directory
  dist::DistEnv env;
};

struct EpochScores {
  int64_t epoch = 0, step = 0;
  double train_loss = 0, dev_loss = 0;
  std::map<std::string, double> dev;
};

struct FinetuneResult : run::RunEnd {
  std::vector<EpochScores> epochs;     // this session's evaluations
  std::map<std::string, double> test;  // final model on the test split (empty without one)
};

FinetuneResult run_finetune(const config::LoadedConfig& config, const FinetuneOptions& options);

}  // namespace roformer::finetune
