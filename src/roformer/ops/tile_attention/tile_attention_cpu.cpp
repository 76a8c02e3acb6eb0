// CPU kernel of tile attention: the items of a launch, claimed by the pool's threads, and the
// loop (tile_attention_loop.h) with no term. Items run in parallel, claimed from a shared counter
// (the largest first); each item is computed by one thread in a fixed order, so the result does
// not depend on the thread count. The terms' loops compile in their own files (terms/*_cpu.cpp).
// Vectors pass by value between always-inlined helpers (see small_gemm.h).
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>

#include "roformer/ops/common/cpu_kernel_support.h"
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
};

}  // namespace tile_no_term

ROFORMER_TILE_TERM_ITEMS(no_term_items, tile_no_term::None)

void tile_attention_cpu(const TileAttentionLaunch& p, TileItems items, const void* tables) {
  // Items of a few short rows each claim several at a time (the scratch is made once per claim).
  const int64_t per_claim = std::max<int64_t>(1, 2048 / std::max<int64_t>(1, p.seq));
  for_each_claim(p.batch * p.heads * ((p.seq + kTileQueryRows - 1) / kTileQueryRows), per_claim,
                 [&](int64_t first, int64_t last) { items(p, tables, first, last); });
}

}  // namespace roformer::ops
