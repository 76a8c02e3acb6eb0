// Where a model runs, one rule for training and evaluation: the device from train.device and
// the process's local rank, and the intra-op thread count.
#pragma once

#include <torch/types.h>

#include "roformer/config/config.h"

namespace roformer::runtime {

// cpu, or cuda:local_rank (auto: CUDA when a GPU is visible). A rank without its own GPU is a
// UserError. strict: train.device=cuda without a GPU is a UserError (training); otherwise it
// falls back to the CPU (evaluating a checkpoint trained elsewhere).
torch::Device pick_device(config::DeviceKind kind, int local_rank, bool strict);

// Sets and returns the intra-op threads: `requested`, or (0) for one process per node the
// CPUs of its affinity mask that other processes are not keeping busy (sampled for 100 ms,
// common/cpu_availability.h), for several the cores shared evenly by the node's processes.
// A count past eight times the CPUs is refused (strict: training) or lowered to the CPUs with a
// warning (evaluating a checkpoint trained on a larger machine).
int apply_threads(int64_t requested, int64_t processes_per_node, bool strict);

// Peak memory the caching allocator handed out on a CUDA device since the start or the last
// reset, in GiB (0 on the CPU); the reset starts a new peak (no-op on the CPU).
double peak_memory_gib(const torch::Device& device);
void reset_peak_memory(const torch::Device& device);

}  // namespace roformer::runtime
