// CPU kernel of tile attention: the items of a launch, claimed by the pool's threads, and the
// loop (tile_attention_loop.h) with no term; the backward's (batch, head) pairs likewise
// (tile_attention_grad_loop.h). Items run in parallel, claimed from a shared counter (the largest
// first); each item is computed by one thread in a fixed order, so the result does not depend on
// the thread count. The terms' loops compile in their own files (terms/*_cpu.cpp).
// Vectors pass by value between always-inlined helpers (see small_gemm.h).
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>

#include "roformer/ops/common/cpu_kernel_support.h"
#include "roformer/ops/tile_attention/tile_attention_grad_loop.h"
#include "roformer/ops/tile_attention/tile_attention_kernels.h"
#include "roformer/ops/tile_attention/tile_attention_loop.h"

namespace roformer::ops {
namespace tile_no_term {

template <typename T, int kBytes = 32>
struct None {
  None(const TileAttentionLaunch&, const void*) {}
  ROFORMER_ALWAYS_INLINE void begin(int64_t, int64_t, int64_t, int64_t) {}
  ROFORMER_ALWAYS_INLINE void tile(int64_t, int64_t) {}
  ROFORMER_ALWAYS_INLINE void output(int64_t, T*, T*) {}
  ROFORMER_ALWAYS_INLINE void add(int64_t, int64_t, int64_t, int64_t, T*) {}
  ROFORMER_ALWAYS_INLINE void grad_begin() {}
  ROFORMER_ALWAYS_INLINE void grad_tile(const T*, int64_t) {}
  ROFORMER_ALWAYS_INLINE void grad_dp(int64_t, int64_t, int64_t, int64_t, T*) {}
  ROFORMER_ALWAYS_INLINE void grad_row(int64_t, int64_t, int64_t, int64_t, const T*, const T*) {}
  ROFORMER_ALWAYS_INLINE void grad_tile_end(int64_t, const T*, const T*, const T*, int64_t) {}
  ROFORMER_ALWAYS_INLINE void grad_end() {}
};

}  // namespace tile_no_term

ROFORMER_TILE_TERM_ITEMS(no_term_items, tile_no_term::None)
ROFORMER_TILE_TERM_GRAD_PAIRS(no_term_grad_pairs, tile_no_term::None)

void tile_attention_cpu(const TileAttentionLaunch& p, TileItems items, const void* tables) {
  // Items of a few short rows each claim several at a time (the scratch is made once per claim).
  const int64_t per_claim = std::max<int64_t>(1, 2048 / std::max<int64_t>(1, p.seq));
  for_each_claim(p.batch * p.heads * ((p.seq + kTileQueryRows - 1) / kTileQueryRows), per_claim,
                 [&](int64_t first, int64_t last) { items(p, tables, first, last); });
}

void tile_attention_grad_cpu(const TileAttentionLaunch& p, const TileAttentionGrad& g, TileGradPairs pairs,
                             const void* tables) {
  for_each_claim(p.batch * p.heads, 1, [&](int64_t first, int64_t last) { pairs(p, g, tables, first, last); });
}

}  // namespace roformer::ops
