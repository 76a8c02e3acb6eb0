// Kernel entry point of tile attention (no LibTorch types): tile_attention.cpp fills a
// TileAttentionLaunch, a term's file (terms/) its tables, and the CPU kernel runs the term's
// items (tile_attention_loop.h's loop, compiled per term).
#pragma once

#include <cstdint>

#include "roformer/ops/common/kernel_dtype.h"

namespace roformer::ops {

// The kernel's tiles: query rows per item (a multiple of small_gemm's 3-, 6- and 8-row tiles)
// and keys per tile (the score tile is 48 x 128, 24 KiB in float).
constexpr int64_t kTileQueryRows = 48;
constexpr int64_t kTileKeys = 128;

struct TileAttentionLaunch {
  int64_t batch = 0, heads = 0, seq = 0, head_dim = 0;
  bool causal = false;
  int normalizer = 0;  // 0 softmax, 1 stick-breaking, 2 stick-breaking with the remainder on the query's value
  KernelDType dtype = KernelDType::f32;  // f32 or f64, every tensor and table alike
  double scale = 1;
  const void* q = nullptr;  // [B, H, S, D], strides below (D: 1)
  int64_t q_stride[3] = {0, 0, 0};
  const void* kt = nullptr;  // k transposed, [B, H, D, kt_ld] contiguous, zero past S
  int64_t kt_ld = 0;         // S rounded up to 16
  const void* v = nullptr;   // [B, H, S, D], strides below (D: 1)
  int64_t v_stride[3] = {0, 0, 0};
  void* out = nullptr;  // [B, H, S, D], strides below (D: 1)
  int64_t out_stride[3] = {0, 0, 0};
  // Softmax only: each row's log-sum-exp of its scores, [B, H, S] contiguous, or null (not kept).
  void* lse = nullptr;
  // Right padding: per batch row the keys [0, key_lengths[b]) it has (each >= 1); null: all S.
  const int64_t* key_lengths = nullptr;
  // Two rotations: far queries (strides below, D: 1) and far keys transposed like kt; pairs with
  // i - j >= far_from score with them. far_q null: none.
  const void* far_q = nullptr;
  int64_t far_q_stride[3] = {0, 0, 0};
  const void* far_kt = nullptr;
  int64_t far_from = 0;
  // Chunks: with chunk > 0, gap floor(i / chunk) - floor(j / chunk) picks q . k (0), mid_q . k (1;
  // strides below, D: 1) or far_q . far_k (2 or more) instead of far_from.
  int64_t chunk = 0;
  const void* mid_q = nullptr;
  int64_t mid_q_stride[3] = {0, 0, 0};
};

// Runs items [first, last) of a launch with one term, its tables at `tables` (the term's own
// struct, in its _kernel.h).
using TileItems = void (*)(const TileAttentionLaunch& launch, const void* tables, int64_t first, int64_t last);

// CPU kernel (tile_attention_cpu.cpp): (batch, head, query tile) items claimed by the pool's
// threads, the largest first; each item's result is computed in one fixed order.
void tile_attention_cpu(const TileAttentionLaunch& launch, TileItems items, const void* tables);

// The items of the launch with no term (plain q . k, or the rotations' scores alone).
TileItems no_term_items(KernelDType dtype);

// What the backward of a launch (softmax or stick-breaking, no rotations) reads and writes besides
// the launch: the forward's log-sum-exp per row (softmax; null for stick-breaking) and
// delta_i = dO_i . O_i, [B, H, S] contiguous each; the output's
// gradient dO (strides below, D: 1); k as rows (strides below, D: 1) and v transposed like kt.
// The gradients of q, k and v, [B, H, S, D] contiguous and zeroed, each (batch, head) pair's
// written by one thread; q's and k's without the scale (the caller applies it).
struct TileAttentionGrad {
  const void* lse = nullptr;
  const void* delta = nullptr;
  const void* grad_out = nullptr;
  int64_t grad_out_stride[3] = {0, 0, 0};
  const void* k = nullptr;
  int64_t k_stride[3] = {0, 0, 0};
  const void* vt = nullptr;
  void* grad_q = nullptr;
  void* grad_k = nullptr;
  void* grad_v = nullptr;
};

// Runs the backward of (batch, head) pairs [first, last) of a launch with one term, its tables
// (with the term's gradient buffers) at `tables`.
using TileGradPairs = void (*)(const TileAttentionLaunch& launch, const TileAttentionGrad& grad, const void* tables,
                               int64_t first, int64_t last);

// CPU kernel of the backward: (batch, head) pairs claimed by the pool's threads; each pair's
// gradients are computed by one thread in a fixed order, so they do not depend on the thread count.
void tile_attention_grad_cpu(const TileAttentionLaunch& launch, const TileAttentionGrad& grad, TileGradPairs pairs,
                             const void* tables);

// The backward with no term.
TileGradPairs no_term_grad_pairs(KernelDType dtype);

}  // namespace roformer::ops
