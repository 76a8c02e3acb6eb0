// CoPE's tile term as its loop reads it (no LibTorch types).
#pragma once

#include <cstdint>

#include "roformer/ops/tile_attention/tile_attention_kernels.h"

namespace roformer::ops {

// q . e at the integer positions, [B, H, S, P] contiguous in the launch's dtype.
// The backward's gradient of the table, [B, H, S, P + 1] (a column more than the table), written
// whole by the kernel (each row's its own). Each row's gate total over its visible keys, [B, H, S]: written by the
// forward where `totals` is set, read by the backward where `known_totals` is (else recounted).
struct CopeTables {
  const void* at_integers = nullptr;
  int64_t positions = 0;
  void* grad_at_integers = nullptr;
  void* totals = nullptr;
  const void* known_totals = nullptr;
};

TileItems cope_items(KernelDType dtype);
TileGradPairs cope_grad_pairs(KernelDType dtype);

}  // namespace roformer::ops
