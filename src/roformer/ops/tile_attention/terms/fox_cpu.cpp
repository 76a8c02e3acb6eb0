// FoX's tile term in the CPU loop: c_i - c_j, the log forget gates summed between the key and the
// query.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <cmath>

#include "roformer/ops/tile_attention/terms/fox_kernel.h"
#include "roformer/ops/tile_attention/tile_attention_loop.h"

namespace roformer::ops {
namespace fox_tiles {

template <typename T, int kBytes = 32>
struct Fox {
  Fox(const TileAttentionLaunch& p, const void* tables)
      : cumulative(static_cast<const T*>(static_cast<const FoxTables*>(tables)->cumulative)),
        heads(p.heads),
        seq(p.seq),
        causal(p.causal) {}
  ROFORMER_ALWAYS_INLINE void begin(int64_t b, int64_t h, int64_t, int64_t) {
    row_sums = cumulative + (b * heads + h) * seq;
  }
  ROFORMER_ALWAYS_INLINE void tile(int64_t, int64_t) {}
  ROFORMER_ALWAYS_INLINE void output(int64_t, T*, T*) {}
  ROFORMER_ALWAYS_INLINE void add(int64_t, int64_t i, int64_t j0, int64_t n, T* row) {
    const T at_query = row_sums[i];
    const T* at_key = row_sums + j0;
    if (causal) {
      for (int64_t c = 0; c < n; ++c) row[c] += at_query - at_key[c];
    } else {
      for (int64_t c = 0; c < n; ++c) row[c] -= std::abs(at_query - at_key[c]);
    }
  }
  const T* cumulative;
  int64_t heads, seq;
  bool causal;
  const T* row_sums = nullptr;
};

}  // namespace fox_tiles

ROFORMER_TILE_TERM_ITEMS(fox_items, fox_tiles::Fox)

}  // namespace roformer::ops
