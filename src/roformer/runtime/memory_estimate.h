// A lower bound on the memory a model needs, from its config alone, checked before anything
// is allocated: a config whose weights and activations cannot fit the device is refused with
// the estimate (exit 2) instead of failing inside the allocator (or swapping for an hour).
#pragma once

#include <torch/types.h>

#include <string>

#include "roformer/config/config.h"

namespace roformer::runtime {

struct MemoryEstimate {
  double parameters = 0;        // as build_model makes them
  double weight_bytes = 0;      // fp32 weights
  double state_bytes = 0;       // training: gradients + two AdamW moments
  double activation_bytes = 0;  // kept for backward (training) or one layer's working set
  double total() const { return weight_bytes + state_bytes + activation_bytes; }
  std::string describe() const;  // "3.2 GiB (86M parameters: ...)"
};

// batch sequences of `length` tokens; training keeps activations for backward; bf16: under
// autocast (2-byte activations).
// checkpoint_every: activation checkpointing in training (config::checkpoint_every; 0 none).
MemoryEstimate estimate_memory(const config::ModelConfig& m, int64_t batch, int64_t length, bool training, bool bf16,
                               int64_t checkpoint_every = 0);

// The memory of the device: for the CPU physical RAM, or less where a cgroup memory limit or the
// address-space limit (what is left under ulimit -v) says so; total GPU memory for CUDA.
double device_memory_bytes(const torch::Device& device);

// Throws UserError with the estimate and `what_to_lower` when it exceeds the device's memory.
void check_fits_device(const MemoryEstimate& estimate, const torch::Device& device, const std::string& what,
                       const std::string& what_to_lower);

}  // namespace roformer::runtime
