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
  // The backward's: each row's denominator's derivatives by c and by the threshold [S] (launch
  // dtype), and the gradients, each (batch, head) pair's own, zeroed, in double: the slopes' and
  // intercepts' [B, H, W + 1], c's and the threshold's [B, H].
  const void* denominator_by_c = nullptr;
  const void* denominator_by_threshold = nullptr;
  double* grad_slope = nullptr;
  double* grad_intercept = nullptr;
  double* grad_c = nullptr;
  double* grad_threshold = nullptr;
};

// psi(d) for d in [0, S), and the sides (future: bidirectional attention only); the backward's
// d psi(d) / dc [S].
struct FireTables {
  const void* psi = nullptr;
  const void* psi_by_c = nullptr;
  FireSide past, future;
};

TileItems fire_items(KernelDType dtype);
TileGradPairs fire_grad_pairs(KernelDType dtype);

}  // namespace roformer::ops
