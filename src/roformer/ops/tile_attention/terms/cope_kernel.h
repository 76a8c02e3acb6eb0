// CoPE's tile term as its loop reads it (no LibTorch types).
#pragma once

#include <cstdint>

#include "roformer/ops/tile_attention/tile_attention_kernels.h"

namespace roformer::ops {

// q . e at the integer positions, [B, H, S, P] contiguous in the launch's dtype.
struct CopeTables {
  const void* at_integers = nullptr;
  int64_t positions = 0;
};

TileItems cope_items(KernelDType dtype);

}  // namespace roformer::ops
