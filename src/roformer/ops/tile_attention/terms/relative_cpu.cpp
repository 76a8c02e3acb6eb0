// The relative table's tile term in the CPU loop.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <vector>

#include "roformer/ops/common/small_gemm.h"
#include "roformer/ops/tile_attention/terms/relative_kernel.h"
#include "roformer/ops/tile_attention/tile_attention_grad_loop.h"
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
        constant_after(kTileQueryRows),
        grads(rel.grad_q != nullptr),
        ds_by_distance(grads ? kTileQueryRows * kSpan : 0),
        value_dp(grads && rel.value != nullptr ? kTileQueryRows * kSpan : 0),
        dq(grads ? kTileQueryRows * p.head_dim : 0),
        row_ds(grads ? kTileQueryRows : 0),
        row_p(grads ? kTileQueryRows : 0) {}
  ROFORMER_ALWAYS_INLINE void begin(int64_t b, int64_t h, int64_t i0, int64_t rows) {
    pair = b * launch.heads + h;
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

  // ---- Backward (the gradients of the products, without the scale) ----
  // Row r's entries by distance, span[d - d_min] = row[c] for key j0 + c at d = i - j0 - c (0 elsewhere).
  ROFORMER_ALWAYS_INLINE void lay_by_distance(int64_t r, int64_t n, const T* row, T* to) const {
    const int64_t last = first_row + r - tile_start - d_min, span = first_row + row_count - 1 - tile_start - d_min + 1;
    std::fill(to, to + span, T(0));
    for (int64_t c = 0; c < std::min(n, last + 1); ++c) to[last - c] = row[c];
  }
  ROFORMER_ALWAYS_INLINE int64_t constant_distance() const {
    return kind == Tile::before ? rel.constant_from : rel.constant_to;
  }
  ROFORMER_ALWAYS_INLINE void grad_begin() { std::fill(dq.begin(), dq.begin() + row_count * launch.head_dim, T(0)); }
  // The value table's part of dP: dO_r . value[d] for the tile's distances.
  ROFORMER_ALWAYS_INLINE void grad_tile(const T* dout, int64_t ld) {
    if (values == nullptr) return;
    const int64_t D = launch.head_dim;
    if (kind != Tile::general) {
      const T* value = values + constant_distance() * D;
      for (int64_t r = 0; r < row_count; ++r) {
        T sum = 0;
        for (int64_t x = 0; x < D; ++x) sum += dout[r * ld + x] * value[x];
        row_p[r] = sum;  // until grad_row: the row's dO . value
      }
      return;
    }
    constexpr int64_t W = small_gemm::Vec<T, kBytes>::width;
    const int64_t span = first_row + row_count - 1 - tile_start - d_min + 1;
    const T* value_t = static_cast<const T*>(rel.value_t) + pair % launch.heads * D * rel.table_ld + rel.origin;
    small_gemm::gemm<T, false, kBytes>(row_count, (span + W - 1) / W * W, D, {dout, ld, 1}, value_t + d_min,
                                       rel.table_ld, value_dp.data(), kSpan);
  }
  ROFORMER_ALWAYS_INLINE void grad_dp(int64_t r, int64_t i, int64_t, int64_t n, T* dp) {
    if (values == nullptr) return;
    if (kind != Tile::general) {
      for (int64_t c = 0; c < n; ++c) dp[c] += row_p[r];
      return;
    }
    const T* at_distance = value_dp.data() + r * kSpan + (i - tile_start - d_min);
    for (int64_t c = 0; c < n; ++c) dp[c] += at_distance[-c];
  }
  ROFORMER_ALWAYS_INLINE void grad_row(int64_t r, int64_t, int64_t, int64_t n, const T* ds, const T* p) {
    if (kind != Tile::general) {
      row_ds[r] = tile_loop::row_sum<kBytes>(ds, n);
      if (values != nullptr) row_p[r] = tile_loop::row_sum<kBytes>(p, n);
      return;
    }
    lay_by_distance(r, n, ds, ds_by_distance.data() + r * kSpan);
    if (values != nullptr) lay_by_distance(r, n, p, by_distance.data() + r * kSpan);
  }
  // d q_r += sum_d dS_r[d] table[d]; d table[d] += sum_r dS_r[d] q_r; d value[d] += sum_r P_r[d] dO_r.
  ROFORMER_ALWAYS_INLINE void grad_tile_end(int64_t, const T*, const T*, const T* dout, int64_t ld) {
    const int64_t D = launch.head_dim, h = pair % launch.heads;
    const T* rows = static_cast<const T*>(rel.table) + h * rel.table_head_stride + rel.origin * D;  // [d]: distance d
    T* grad_table = static_cast<T*>(rel.grad_table) + (pair * (rel.origin + launch.seq) + rel.origin) * D;
    T* grad_value = rel.grad_value == nullptr
                        ? nullptr
                        : static_cast<T*>(rel.grad_value) + (pair * (rel.origin + launch.seq) + rel.origin) * D;
    if (kind != Tile::general) {
      const int64_t d = constant_distance();
      for (int64_t r = 0; r < row_count; ++r) {
        const T* q = queries + r * rel.q_stride[2];
        for (int64_t x = 0; x < D; ++x) {
          dq[r * D + x] += row_ds[r] * rows[d * D + x];
          grad_table[d * D + x] += row_ds[r] * q[x];
          if (grad_value != nullptr) grad_value[d * D + x] += row_p[r] * dout[r * ld + x];
        }
      }
      return;
    }
    const int64_t span = first_row + row_count - 1 - tile_start - d_min + 1;
    small_gemm::gemm<T, true, kBytes>(row_count, D, span, {ds_by_distance.data(), kSpan, 1}, rows + d_min * D, D,
                                      dq.data(), D);
    small_gemm::gemm<T, true, kBytes>(span, D, row_count, {ds_by_distance.data(), 1, kSpan}, queries, rel.q_stride[2],
                                      grad_table + d_min * D, D);
    if (grad_value != nullptr)
      small_gemm::gemm<T, true, kBytes>(span, D, row_count, {by_distance.data(), 1, kSpan}, dout, ld,
                                        grad_value + d_min * D, D);
  }
  ROFORMER_ALWAYS_INLINE void grad_end() {
    const int64_t D = launch.head_dim;
    T* out = static_cast<T*>(rel.grad_q) + (pair * launch.seq + first_row) * D;
    std::copy(dq.begin(), dq.begin() + row_count * D, out);
  }

  const TileAttentionLaunch& launch;
  const RelativeTables& rel;
  T scale;
  std::vector<T> products, by_distance, value_product, constant_before, constant_after;
  bool grads;
  std::vector<T> ds_by_distance, value_dp, dq, row_ds, row_p;
  int64_t pair = 0;
  const T* values = nullptr;
  const T* queries = nullptr;
  const T* table = nullptr;
  int64_t first_row = 0, row_count = 0, d_min = 0, tile_start = 0;
  Tile kind = Tile::general;
};

}  // namespace relative_tiles

ROFORMER_TILE_TERM_ITEMS(relative_items, relative_tiles::Relative)
ROFORMER_TILE_TERM_GRAD_PAIRS(relative_grad_pairs, relative_tiles::Relative)

}  // namespace roformer::ops
