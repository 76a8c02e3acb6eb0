// CoPE's tile term in the CPU loop: the gates of a tile's keys in one vectorisable pass, then the
// running sum from the row's last key back (carried between tiles) and the interpolation, in
// ops::cope_term's order.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <vector>

#include "roformer/ops/common/cope_math.h"
#include "roformer/ops/tile_attention/terms/cope_kernel.h"
#include "roformer/ops/tile_attention/tile_attention_loop.h"

namespace roformer::ops {
namespace cope_tiles {

template <typename T, int kBytes = 32>
struct Cope {
  Cope(const TileAttentionLaunch& p, const void* tables_in)
      : table(static_cast<const T*>(static_cast<const CopeTables*>(tables_in)->at_integers)),
        heads(p.heads),
        seq(p.seq),
        positions(static_cast<const CopeTables*>(tables_in)->positions),
        top(static_cast<T>(positions - 1)) {}
  ROFORMER_ALWAYS_INLINE void begin(int64_t b, int64_t h, int64_t i0, int64_t rows) {
    rows_table = table + ((b * heads + h) * seq + i0) * positions;
    counted.assign(rows, T(0));
  }
  ROFORMER_ALWAYS_INLINE void tile(int64_t, int64_t) {}
  ROFORMER_ALWAYS_INLINE void output(int64_t, T*, T*) {}
  ROFORMER_ALWAYS_INLINE void add(int64_t r, int64_t, int64_t, int64_t n, T* row) {
    if (static_cast<int64_t>(gates.size()) < n) gates.resize(n);
    for (int64_t c = 0; c < n; ++c) gates[c] = sigmoid(row[c]);
    const T* a = rows_table + r * positions;
    T position = counted[r];
    for (int64_t c = n - 1; c >= 0; --c) {
      position += gates[c];
      const auto at = cope_math::interpolation(position, top);
      row[c] += a[at.high] * at.w + a[at.low] * (T(1) - at.w);
    }
    counted[r] = position;
  }
  const T* table;
  int64_t heads, seq, positions;
  T top;
  const T* rows_table = nullptr;
  std::vector<T> counted;  // per row: the gates summed over the keys already visited
  std::vector<T> gates;
};

}  // namespace cope_tiles

ROFORMER_TILE_TERM_ITEMS(cope_items, cope_tiles::Cope)

}  // namespace roformer::ops
