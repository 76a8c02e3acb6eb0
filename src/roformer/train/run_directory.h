// The run directory a training or fine-tuning run writes (config.yaml, train.log,
// metrics.jsonl, checkpoints/), checked before anything is written: what exists has the kind
// the run writes, it is writable, and checkpoints that are all incomplete are never silently
// restarted over.
#pragma once

#include <string>

namespace roformer::train {

// Fails (UserError) before any training if `dir` cannot be created or written.
void check_writable(const std::string& dir);

// `resume` is the --resume argument ("", "auto" or a checkpoint directory).
void check_run_directory(const std::string& run_dir, const std::string& resume);

// The checkpoint to continue from: --resume auto takes the newest complete one (or none),
// a path is taken as given (checked complete); without --resume a directory that already has
// checkpoints is refused. Returns "" to start fresh.
std::string resume_target(const std::string& run_dir, const std::string& resume);

}  // namespace roformer::train
