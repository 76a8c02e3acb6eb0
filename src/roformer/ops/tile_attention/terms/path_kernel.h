// PaTH's tile term as its loop reads it (no LibTorch types).
#pragma once

#include "roformer/ops/tile_attention/tile_attention_kernels.h"

namespace roformer::ops {

// w (D), beta and c per token, [B, H, S, D + 2] contiguous in the launch's dtype; whether c_i - c_j
// joins the scores.
struct PathTables {
  const void* state = nullptr;
  bool forget_gate = false;
};

TileItems path_items(KernelDType dtype);

}  // namespace roformer::ops
