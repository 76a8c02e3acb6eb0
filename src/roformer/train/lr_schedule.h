// Learning-rate schedule: linear warmup from 0 to lr over warmup_steps, then cosine or linear
// decay to min_lr_ratio * lr at the last step (or constant). Torch-free.
#pragma once

#include <cstdint>

#include "roformer/config/config.h"

namespace roformer::train {

// Rate for optimizer step `step` (0-based) of `train.steps`.
double learning_rate(const config::TrainConfig& train, int64_t step);

}  // namespace roformer::train
