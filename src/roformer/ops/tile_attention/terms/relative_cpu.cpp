// The relative table's tile term in the CPU loop.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <vector>

#include "roformer/ops/common/small_gemm.h"
#include "roformer/ops/tile_attention/terms/relative_kernel.h"
#include "roformer/ops/tile_attention/tile_attention_loop.h"

namespace roformer::ops {
namespace relative_tiles {

// Per key tile, one product of the rows' queries with the table rows of the
// tile's distances (at most rows + width - 1 of them), G[r][d - d_min]; the term of key j in row
// i is then G[r][i - j - d_min], read backwards along the row. A value table the other way: the
// tile's weights laid out by distance, times the table rows of those distances.
template <typename T>
struct Relative {
  static constexpr int64_t kSpan = kTileQueryRows + kTileKeys + 8;  // distances of a tile, padded
  Relative(const TileAttentionLaunch& p, const void* tables_in)
      : launch(p),
        rel(*static_cast<const RelativeTables*>(tables_in)),
        scale(static_cast<T>(p.scale)),
        products(kTileQueryRows * kSpan),
        by_distance(rel.value != nullptr ? kTileQueryRows * kSpan : 0),
        value_product(rel.value != nullptr ? kTileQueryRows * p.head_dim : 0) {}
  ROFORMER_ALWAYS_INLINE void begin(int64_t b, int64_t h, int64_t i0, int64_t rows) {
    queries = static_cast<const T*>(rel.q) + b * rel.q_stride[0] + h * rel.q_stride[1] + i0 * rel.q_stride[2];
    table = static_cast<const T*>(rel.table_t) + h * launch.head_dim * rel.table_ld;
    first_row = i0;
    row_count = rows;
    if (rel.value != nullptr) values = static_cast<const T*>(rel.value) + h * rel.value_head_stride;
  }
  ROFORMER_ALWAYS_INLINE void tile(int64_t j0, int64_t width) {
    constexpr int64_t W = small_gemm::Vec<T>::width;
    d_min = std::max<int64_t>(0, first_row - (j0 + width - 1));
    const int64_t span = first_row + row_count - 1 - j0 - d_min + 1;
    small_gemm::gemm<T>(row_count, (span + W - 1) / W * W, launch.head_dim, {queries, rel.q_stride[2], 1},
                        table + d_min, rel.table_ld, products.data(), kSpan);
    tile_start = j0;
  }
  ROFORMER_ALWAYS_INLINE void add(int64_t r, int64_t i, int64_t, int64_t n, T* row) {
    const T* at_distance = products.data() + r * kSpan + (i - tile_start - d_min);  // [-c]: key j0 + c
    for (int64_t c = 0; c < n; ++c) row[c] += scale * at_distance[-c];
  }
  ROFORMER_ALWAYS_INLINE void output(int64_t width, T* weights, T* product) {
    if (values == nullptr) return;
    const int64_t D = launch.head_dim, span = first_row + row_count - 1 - tile_start - d_min + 1;
    for (int64_t r = 0; r < row_count; ++r) {  // key j0 + c at distance i - j0 - c
      T* to = by_distance.data() + r * kSpan;
      std::fill(to, to + span, T(0));
      const int64_t last = first_row + r - tile_start - d_min;  // distance row of key j0
      const T* w = weights + r * kTileKeys;
      for (int64_t c = 0; c < std::min(width, last + 1); ++c) to[last - c] = w[c];
    }
    small_gemm::gemm<T>(row_count, D, span, {by_distance.data(), kSpan, 1}, values + d_min * D, D, value_product.data(),
                        D);
    for (int64_t x = 0; x < row_count * D; ++x) product[x] += value_product[x];
  }
  const TileAttentionLaunch& launch;
  const RelativeTables& rel;
  T scale;
  std::vector<T> products, by_distance, value_product;
  const T* values = nullptr;
  const T* queries = nullptr;
  const T* table = nullptr;
  int64_t first_row = 0, row_count = 0, d_min = 0, tile_start = 0;
};

}  // namespace relative_tiles

ROFORMER_TILE_TERM_ITEMS(relative_items, relative_tiles::Relative)

}  // namespace roformer::ops
