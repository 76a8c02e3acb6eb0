// The relative table's tile term in the CPU loop.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <vector>

#include "roformer/ops/common/small_gemm.h"
#include "roformer/ops/tile_attention/terms/relative_kernel.h"
#include "roformer/ops/tile_attention/tile_attention_loop.h"

namespace roformer::ops {
namespace relative_tiles {

// Per key tile, one product of the rows' queries with the table rows of the tile's distances (at
// most rows + width - 1 of them; negative ones too, for keys after the query in bidirectional
// attention), G[r][d - d_min]; the term of key j in row i is then G[r][i - j - d_min], read
// backwards along the row. A value table the other way: the tile's weights laid out by distance,
// times the table rows of those distances. A tile whose distances all lie where the table stops
// changing (a clipped table, Shaw's, past its clip on either side) takes one product per row,
// formed when the item begins, and its value term is the row's weight sum times that row.
template <typename T, int kBytes = 32>
struct Relative {
  static constexpr int64_t kSpan = kTileQueryRows + kTileKeys + 16;  // distances of a tile, padded to 64 bytes
  enum class Tile { general, before, after };  // the tile's distances: mixed, all >= constant_from, all <= constant_to
  Relative(const TileAttentionLaunch& p, const void* tables_in)
      : launch(p),
        rel(*static_cast<const RelativeTables*>(tables_in)),
        scale(static_cast<T>(p.scale)),
        products(kTileQueryRows * kSpan),
        by_distance(rel.value != nullptr ? kTileQueryRows * kSpan : 0),
        value_product(rel.value != nullptr ? kTileQueryRows * p.head_dim : 0),
        constant_before(kTileQueryRows),
        constant_after(kTileQueryRows) {}
  ROFORMER_ALWAYS_INLINE void begin(int64_t b, int64_t h, int64_t i0, int64_t rows) {
    queries = static_cast<const T*>(rel.q) + b * rel.q_stride[0] + h * rel.q_stride[1] + i0 * rel.q_stride[2];
    table = static_cast<const T*>(rel.table_t) + h * launch.head_dim * rel.table_ld + rel.origin;  // [d]: distance d
    first_row = i0;
    row_count = rows;
    if (rel.value != nullptr)
      values = static_cast<const T*>(rel.value) + h * rel.value_head_stride + rel.origin * launch.head_dim;
    if (rel.constant_from < launch.seq) row_products(rel.constant_from, constant_before.data());
    if (rel.constant_to >= -rel.origin) row_products(rel.constant_to, constant_after.data());
  }
  // out[r] = q_r . table[d] for the item's rows.
  ROFORMER_ALWAYS_INLINE void row_products(int64_t d, T* out) const {
    for (int64_t r = 0; r < row_count; ++r) {
      const T* q = queries + r * rel.q_stride[2];
      T sum = 0;
      for (int64_t x = 0; x < launch.head_dim; ++x) sum += q[x] * table[x * rel.table_ld + d];
      out[r] = sum;
    }
  }
  ROFORMER_ALWAYS_INLINE void tile(int64_t j0, int64_t width) {
    constexpr int64_t W = small_gemm::Vec<T, kBytes>::width;
    d_min = first_row - (j0 + width - 1);  // causal: no key after the query
    if (launch.causal) d_min = std::max<int64_t>(d_min, 0);
    const int64_t d_max = first_row + row_count - 1 - j0;
    tile_start = j0;
    kind = d_min >= rel.constant_from ? Tile::before : d_max <= rel.constant_to ? Tile::after : Tile::general;
    if (kind != Tile::general) return;
    small_gemm::gemm<T, false, kBytes>(row_count, (d_max - d_min + 1 + W - 1) / W * W, launch.head_dim,
                                       {queries, rel.q_stride[2], 1}, table + d_min, rel.table_ld, products.data(),
                                       kSpan);
  }
  ROFORMER_ALWAYS_INLINE void add(int64_t r, int64_t i, int64_t, int64_t n, T* row) {
    if (kind != Tile::general) {
      const T term = scale * (kind == Tile::before ? constant_before[r] : constant_after[r]);
      for (int64_t c = 0; c < n; ++c) row[c] += term;
      return;
    }
    const T* at_distance = products.data() + r * kSpan + (i - tile_start - d_min);  // [-c]: key j0 + c
    for (int64_t c = 0; c < n; ++c) row[c] += scale * at_distance[-c];
  }
  ROFORMER_ALWAYS_INLINE void output(int64_t width, T* weights, T* product) {
    if (values == nullptr) return;
    const int64_t D = launch.head_dim;
    if (kind != Tile::general) {  // one value row: each row's weight sum times it
      const T* value = values + (kind == Tile::before ? rel.constant_from : rel.constant_to) * D;
      for (int64_t r = 0; r < row_count; ++r) {
        const T sum = tile_loop::row_sum<kBytes>(weights + r * kTileKeys, width);
        for (int64_t x = 0; x < D; ++x) product[r * D + x] += sum * value[x];
      }
      return;
    }
    const int64_t span = first_row + row_count - 1 - tile_start - d_min + 1;
    for (int64_t r = 0; r < row_count; ++r) {  // key j0 + c at distance i - j0 - c
      T* to = by_distance.data() + r * kSpan;
      std::fill(to, to + span, T(0));
      const int64_t last = first_row + r - tile_start - d_min;  // distance row of key j0
      const T* w = weights + r * kTileKeys;
      for (int64_t c = 0; c < std::min(width, last + 1); ++c) to[last - c] = w[c];
    }
    small_gemm::gemm<T, false, kBytes>(row_count, D, span, {by_distance.data(), kSpan, 1}, values + d_min * D, D,
                                       value_product.data(), D);
    for (int64_t x = 0; x < row_count * D; ++x) product[x] += value_product[x];
  }
  const TileAttentionLaunch& launch;
  const RelativeTables& rel;
  T scale;
  std::vector<T> products, by_distance, value_product, constant_before, constant_after;
  const T* values = nullptr;
  const T* queries = nullptr;
  const T* table = nullptr;
  int64_t first_row = 0, row_count = 0, d_min = 0, tile_start = 0;
  Tile kind = Tile::general;
};

}  // namespace relative_tiles

ROFORMER_TILE_TERM_ITEMS(relative_items, relative_tiles::Relative)

}  // namespace roformer::ops
