// How a run ended, the part every training task reports alike (pretraining's TrainResult and
// fine-tuning's FinetuneResult extend it): the exit code `roformer train` / `finetune` exit
// with, the steps completed and the run directory written.
#pragma once

#include <cstdint>
#include <string>

namespace roformer::run {

// Exit code when a run stops on a non-finite loss or gradient norm (train.on_nonfinite=stop).
constexpr int kNonFiniteExitCode = 3;

struct RunEnd {
  int exit_code = 0;  // 0 done; 128 + signal (130, 143) stopped by SIGINT/SIGTERM, checkpoint saved; 3 non-finite
  int64_t step = 0;   // optimizer steps completed
  std::string run_dir;
};

}  // namespace roformer::run
