// FIRE's tile term as its loop reads it (no LibTorch types): fire.cpp forms the tables,
// fire_cpu.cpp runs them.
#pragma once

#include <cstdint>

#include "roformer/ops/tile_attention/tile_attention_kernels.h"

namespace roformer::ops {

// One side of FIRE (the keys at or before the query, or those after it): each query row's
// denominator [S]; the kinks' count W; per row the first distance whose x exceeds each kink,
// [S, W] (S where none does); slopes and intercepts [H, W + 1]; in the launch's dtype.
struct FireSide {
  const void* denominator = nullptr;
  const int64_t* bounds = nullptr;
  int64_t kinks = 0;
  const void* slope = nullptr;
  const void* intercept = nullptr;
};

// psi(d) for d in [0, S), and the sides (future: bidirectional attention only).
struct FireTables {
  const void* psi = nullptr;
  FireSide past, future;
};

TileItems fire_items(KernelDType dtype);

}  // namespace roformer::ops
