// FoX's tile term as its loop reads it (no LibTorch types).
#pragma once

#include "roformer/ops/tile_attention/tile_attention_kernels.h"

namespace roformer::ops {

// The gates' running sums, [B, H, S] contiguous in the launch's dtype.
struct FoxTables {
  const void* cumulative = nullptr;
};

TileItems fox_items(KernelDType dtype);

}  // namespace roformer::ops
