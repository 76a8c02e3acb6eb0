// Kernel entry points of PaTH's attention in blocks (no LibTorch types): path_blocks.cpp fills a
// PathBlockLaunch, path_blocks_cpu.cpp runs it.
#pragma once

#include <cstdint>

#include "roformer/ops/common/kernel_dtype.h"

namespace roformer::ops {

// Every tensor contiguous in the launch's dtype (f32 or f64). Block-major ones are [n, pairs, ...]
// (PaTH's key blocks); per-pair ones are [pairs, n * block, ...], zero past `length`.
struct PathBlockLaunch {
  KernelDType dtype = KernelDType::f32;
  int64_t pairs = 0, blocks = 0, block = 0, head_dim = 0, length = 0;
  double scale = 1;
  const void* own = nullptr;        // [n, pairs, b, b]: each query block's raw scores with its own keys
  const void* rows = nullptr;       // [n, pairs, b, D]: each query block's rows carried to its start
  const void* carried = nullptr;    // [n, pairs, b, D]: each key block's keys carried to its end
  const void* carried_t = nullptr;  // [n, pairs, D, b]: the same transposed
  const void* product = nullptr;    // [n, pairs, D, D]: each block's product of transforms
  const void* product_t = nullptr;  // [n, pairs, D, D]: the same transposed (backward)
  const void* v = nullptr;          // [pairs, n * b, D]
  const void* vt = nullptr;         // [pairs, D, n * b] (backward)
  const void* gate = nullptr;       // [pairs, n * b]: FoX's running sums c, or null
  void* out = nullptr;              // [pairs, n * b, D]
  void* lse = nullptr;              // [pairs, n * b]: each row's log-sum-exp of its scores
  // Backward: d out and delta = rowsum(d out * out) in, the gradients out (zero-filled by the caller).
  const void* grad_out = nullptr;  // [pairs, n * b, D]
  const void* delta = nullptr;     // [pairs, n * b]
  void *d_own = nullptr, *d_rows = nullptr, *d_carried = nullptr, *d_product = nullptr, *d_v = nullptr,
       *d_gate = nullptr;
};

// The forward over (pair, query block) items and the backward over pairs, each item computed by
// one thread in a fixed order (the result does not depend on the thread count).
void path_block_forward_cpu(const PathBlockLaunch& launch);
void path_block_backward_cpu(const PathBlockLaunch& launch);

}  // namespace roformer::ops

namespace roformer::ops {

// What PaTH's blocks are formed from, per pair [pairs, n * b, ...] zero past `length` (w and beta
// 0 there: H = I), and what the forward keeps for the backward, block-major [n, pairs, b, b]:
// each block's UT transform T and strictly_lower(W K^T) R.
struct PathInputsLaunch {
  KernelDType dtype = KernelDType::f32;
  int64_t pairs = 0, blocks = 0, block = 0, head_dim = 0;
  const void *q = nullptr, *k = nullptr, *w = nullptr;  // [pairs, n * b, D]
  const void* beta = nullptr;                           // [pairs, n * b]
  void *transform = nullptr, *reach = nullptr;          // written by the forward, read by the backward
  void *own = nullptr, *rows = nullptr, *carried = nullptr, *product = nullptr;  // PathBlocks' tensors
  // Backward: PathBlocks' gradients in, q's, k's, w's and beta's out (every entry written).
  const void *d_own = nullptr, *d_rows = nullptr, *d_carried = nullptr, *d_product = nullptr;
  void *d_q = nullptr, *d_k = nullptr, *d_w = nullptr, *d_beta = nullptr;
};

// Both over (pair, block) items, each on one thread.
void path_inputs_forward_cpu(const PathInputsLaunch& launch);
void path_inputs_backward_cpu(const PathInputsLaunch& launch);

}  // namespace roformer::ops
