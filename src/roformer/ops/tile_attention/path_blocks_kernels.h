// Kernel entry points of PaTH's attention in blocks (no LibTorch types): path_blocks.cpp fills a
// PathBlockLaunch, path_blocks_cpu.cpp runs it.
#pragma once

#include <cstdint>

#include "roformer/ops/common/kernel_dtype.h"

namespace roformer::ops {

// Rows of a [B, H, S, width] tensor whose rows are contiguous: the row of token t of pair p (batch
// p / heads, head p % heads) starts at data + (p / heads) * batch_stride + (p % heads) * head_stride
// + t * token_stride elements, so the kernels read and write LibTorch's views of the projections
// ([B, S, H, D] memory seen as [B, H, S, D]) without copies.
struct PairRows {
  void* data = nullptr;
  int64_t heads = 1, batch_stride = 0, head_stride = 0, token_stride = 0;
  template <typename T>
  T* row(int64_t pair, int64_t t) const {
    return static_cast<T*>(data) + (pair / heads) * batch_stride + (pair % heads) * head_stride + t * token_stride;
  }
};

// The launch's tensors in its dtype (f32 or f64). Block-major ones are [n, pairs, ...] (PaTH's
// key blocks), contiguous; lse and delta are per pair [pairs, n * block].
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
  PairRows v;                       // [B, H, S, D]
  const void* vt = nullptr;         // [pairs, D, n * b]: v transposed, zero past S (backward)
  const void* gate = nullptr;       // [pairs, S]: FoX's running sums c, or null
  PairRows out;                     // [B, H, S, D]
  void* lse = nullptr;              // [pairs, n * b]: each row's log-sum-exp of its scores
  // Backward: d out in, the gradients out (every entry written by the kernel, d_gate zero-filled
  // by the caller); delta = rowsum(d out * out) is scratch the backward fills.
  PairRows grad_out, d_v;
  void* delta = nullptr;  // [pairs, n * b]
  void *d_own = nullptr, *d_rows = nullptr, *d_carried = nullptr, *d_product = nullptr, *d_gate = nullptr;
};

// The forward over (pair, query block) items and the backward over pairs, each item computed by
// one thread in a fixed order (the result does not depend on the thread count).
void path_block_forward_cpu(const PathBlockLaunch& launch);
void path_block_backward_cpu(const PathBlockLaunch& launch);

}  // namespace roformer::ops

namespace roformer::ops {

// What PaTH's blocks are formed from: q, k [B, H, S, D] and PaTH's layer state [B, H, S, >= D + 1]
// (w its first D columns, beta the next; past S a block takes zeros: w and beta 0 there, H = I), and
// what the forward keeps for the backward, block-major [n, pairs, path_inputs_saved_size(b, D)]:
// each block's UT transform T, strictly_lower(W K^T) R, strictly_lower(W W^T), tril(Q W^T), T R and
// T W (path_inputs_cpu.cpp's lines).
struct PathInputsLaunch {
  KernelDType dtype = KernelDType::f32;
  int64_t pairs = 0, blocks = 0, block = 0, head_dim = 0, length = 0;
  PairRows q, k, state;
  void* saved = nullptr;  // written by the forward, read by the backward
  void *own = nullptr, *rows = nullptr, *carried = nullptr, *product = nullptr;  // PathBlocks' tensors
  // Backward: PathBlocks' gradients in, q's, k's and the state's out (every entry of the state's
  // rows written: its columns past D + 1 zero).
  const void *d_own = nullptr, *d_rows = nullptr, *d_carried = nullptr, *d_product = nullptr;
  PairRows d_q, d_k, d_state;
  int64_t state_width = 0;
};

// Elements a block keeps for the backward: five [b, b] matrices and one [b, D].
inline int64_t path_inputs_saved_size(int64_t block, int64_t head_dim) {
  return 5 * block * block + block * head_dim;
}

// Both over (pair, block) items, each on one thread.
void path_inputs_forward_cpu(const PathInputsLaunch& launch);
void path_inputs_backward_cpu(const PathInputsLaunch& launch);

}  // namespace roformer::ops
