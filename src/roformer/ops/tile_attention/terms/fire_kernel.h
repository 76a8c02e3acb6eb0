// FIRE's tile term as its loop reads it (no LibTorch types): fire.cpp forms the tables,
// fire_cpu.cpp runs them.
#pragma once

#include <cstdint>

#include "roformer/ops/tile_attention/tile_attention_kernels.h"

namespace roformer::ops {

// psi(d) for d in [0, S); each query row's denominator [S]; the kinks' count W; per row the
// first distance whose x exceeds each kink, [S, W] (S where none does); slopes and intercepts
// [H, W + 1]; all in the launch's dtype.
struct FireTables {
  const void* psi = nullptr;
  const void* denominator = nullptr;
  const int64_t* bounds = nullptr;
  int64_t kinks = 0;
  const void* slope = nullptr;
  const void* intercept = nullptr;
};

TileItems fire_items(KernelDType dtype);

}  // namespace roformer::ops
