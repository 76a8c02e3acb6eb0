// The position terms of tile attention's CPU kernel, one struct per family, each added to a
// row's scores within one key tile. The kernel visits an item's key tiles from the diagonal back
// to key 0, so a term may carry per-row state from tile to tile (CoPE's running gate sum).
//   begin(b, h, i0, rows): a new item, query rows [i0, i0 + rows) of batch b, head h;
//   tile(j0, width):       a new key tile, keys [j0, j0 + width), before its rows;
//   add(r, i, j0, n, row): row r (query i) of the tile, keys [j0, j0 + n), all visible, holds the
//                          scaled scores q.k; the term is added in place;
//   output(width, weights, product): after the tile's weights (rows of kTileKeys) met its values
//                          in product (rows of D), a term of the weights added to product;
//   scores(j0, width, out): only a term that forms the scores itself (PaTH): the tile's raw
//                          scores into out (rows of kTileKeys) instead of the product q k^T.
// Header-only and always inlined, so the kernel's ROFORMER_CLONES functions compile it per
// instruction set.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "roformer/ops/common/cope_math.h"
#include "roformer/ops/common/cpu_kernel_support.h"
#include "roformer/ops/common/small_gemm.h"
#include "roformer/ops/tile_attention/tile_attention_kernels.h"

namespace roformer::ops::tile_terms {

// Whether a term forms the tile's scores itself (has scores()).
template <typename Term, typename = void>
struct forms_scores : std::false_type {};
template <typename Term>
struct forms_scores<Term, std::void_t<decltype(&Term::scores)>> : std::true_type {};

template <typename T>
struct None {
  explicit None(const TileAttentionLaunch&) {}
  ROFORMER_ALWAYS_INLINE void begin(int64_t, int64_t, int64_t, int64_t) {}
  ROFORMER_ALWAYS_INLINE void tile(int64_t, int64_t) {}
  ROFORMER_ALWAYS_INLINE void output(int64_t, T*, T*) {}
  ROFORMER_ALWAYS_INLINE void add(int64_t, int64_t, int64_t, int64_t, T*) {}
};

// FIRE: between two consecutive kinks the MLP is one line per head, and a row's keys fall in
// each segment as one run of distances (x grows with the distance), so the term is a few
// vectorisable runs of slope * psi(d) / denominator + intercept; the runs' ends are the launch's
// bounds table.
template <typename T>
struct Fire {
  explicit Fire(const TileAttentionLaunch& p)
      : psi(static_cast<const T*>(p.fire_psi)),
        denominator(static_cast<const T*>(p.fire_denominator)),
        bounds(p.fire_bounds),
        kinks(p.fire_kinks),
        all_slope(static_cast<const T*>(p.fire_slope)),
        all_intercept(static_cast<const T*>(p.fire_intercept)) {}
  ROFORMER_ALWAYS_INLINE void begin(int64_t, int64_t h, int64_t, int64_t) {
    slope = all_slope + h * (kinks + 1);
    intercept = all_intercept + h * (kinks + 1);
  }
  ROFORMER_ALWAYS_INLINE void tile(int64_t, int64_t) {}
  ROFORMER_ALWAYS_INLINE void output(int64_t, T*, T*) {}
  ROFORMER_ALWAYS_INLINE void add(int64_t, int64_t i, int64_t j0, int64_t n, T* row) {
    const int64_t* bound = bounds + i * kinks;  // first distance of segment s + 1 is bound[s]
    const T denom = denominator[i];
    const T* psi_back = psi + (i - j0);                       // psi_back[-c] = psi(i - (j0 + c))
    const int64_t d_low = i - (j0 + n - 1), d_high = i - j0;  // the tile's distances, inclusive
    int64_t s = 0;
    while (s < kinks && bound[s] <= d_low) ++s;
    for (int64_t d = d_low; d <= d_high; ++s) {
      const int64_t d_end = std::min(d_high + 1, s < kinks ? bound[s] : d_high + 1);  // segment s: [d, d_end)
      const T a = slope[s], b = intercept[s];
      const int64_t c_first = i - (d_end - 1) - j0, c_last = i - d - j0;
      for (int64_t c = c_first; c <= c_last; ++c) row[c] += a * (psi_back[-c] / denom) + b;
      d = std::max(d, d_end);
    }
  }
  const T* psi;
  const T* denominator;
  const int64_t* bounds;
  int64_t kinks;
  const T* all_slope;
  const T* all_intercept;
  const T* slope = nullptr;
  const T* intercept = nullptr;
};

// CoPE: the gates of a tile's keys in one vectorisable pass, then the running sum from the
// row's last key back (carried between tiles) and the interpolation, in ops::cope_term's order.
template <typename T>
struct Cope {
  explicit Cope(const TileAttentionLaunch& p)
      : table(static_cast<const T*>(p.cope_at_integers)),
        heads(p.heads),
        seq(p.seq),
        positions(p.cope_positions),
        top(static_cast<T>(p.cope_positions - 1)) {}
  ROFORMER_ALWAYS_INLINE void begin(int64_t b, int64_t h, int64_t i0, int64_t rows) {
    rows_table = table + ((b * heads + h) * seq + i0) * positions;
    counted.assign(rows, T(0));
  }
  ROFORMER_ALWAYS_INLINE void tile(int64_t, int64_t) {}
  ROFORMER_ALWAYS_INLINE void output(int64_t, T*, T*) {}
  ROFORMER_ALWAYS_INLINE void add(int64_t r, int64_t, int64_t, int64_t n, T* row) {
    if (static_cast<int64_t>(gates.size()) < n) gates.resize(n);
    for (int64_t c = 0; c < n; ++c) gates[c] = cope_math::sigmoid(row[c]);
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

// FoX: c_i - c_j, the log forget gates summed between the key and the query.
template <typename T>
struct Fox {
  explicit Fox(const TileAttentionLaunch& p)
      : cumulative(static_cast<const T*>(p.fox_cumulative)), heads(p.heads), seq(p.seq) {}
  ROFORMER_ALWAYS_INLINE void begin(int64_t b, int64_t h, int64_t, int64_t) {
    row_sums = cumulative + (b * heads + h) * seq;
  }
  ROFORMER_ALWAYS_INLINE void tile(int64_t, int64_t) {}
  ROFORMER_ALWAYS_INLINE void output(int64_t, T*, T*) {}
  ROFORMER_ALWAYS_INLINE void add(int64_t, int64_t i, int64_t j0, int64_t n, T* row) {
    const T at_query = row_sums[i];
    const T* at_key = row_sums + j0;
    for (int64_t c = 0; c < n; ++c) row[c] += at_query - at_key[c];
  }
  const T* cumulative;
  int64_t heads, seq;
  const T* row_sums = nullptr;
};

// A relative table: per key tile, one product of the rows' queries with the table rows of the
// tile's distances (at most rows + width - 1 of them), G[r][d - d_min]; the term of key j in row
// i is then G[r][i - j - d_min], read backwards along the row. A value table the other way: the
// tile's weights laid out by distance, times the table rows of those distances.
template <typename T>
struct Relative {
  static constexpr int64_t kSpan = kTileQueryRows + kTileKeys + 8;  // distances of a tile, padded
  explicit Relative(const TileAttentionLaunch& p)
      : launch(p),
        scale(static_cast<T>(p.scale)),
        products(kTileQueryRows * kSpan),
        by_distance(p.relative_value != nullptr ? kTileQueryRows * kSpan : 0),
        value_product(p.relative_value != nullptr ? kTileQueryRows * p.head_dim : 0) {}
  ROFORMER_ALWAYS_INLINE void begin(int64_t b, int64_t h, int64_t i0, int64_t rows) {
    queries = static_cast<const T*>(launch.relative_q) + b * launch.relative_q_stride[0] +
              h * launch.relative_q_stride[1] + i0 * launch.relative_q_stride[2];
    table = static_cast<const T*>(launch.relative_table_t) + h * launch.head_dim * launch.relative_table_ld;
    first_row = i0;
    row_count = rows;
    if (launch.relative_value != nullptr)
      values = static_cast<const T*>(launch.relative_value) + h * launch.relative_value_head_stride;
  }
  ROFORMER_ALWAYS_INLINE void tile(int64_t j0, int64_t width) {
    constexpr int64_t W = small_gemm::Vec<T>::width;
    d_min = std::max<int64_t>(0, first_row - (j0 + width - 1));
    const int64_t span = first_row + row_count - 1 - j0 - d_min + 1;
    small_gemm::gemm<T>(row_count, (span + W - 1) / W * W, launch.head_dim, {queries, launch.relative_q_stride[2], 1},
                        table + d_min, launch.relative_table_ld, products.data(), kSpan);
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
  T scale;
  std::vector<T> products, by_distance, value_product;
  const T* values = nullptr;
  const T* queries = nullptr;
  const T* table = nullptr;
  int64_t first_row = 0, row_count = 0, d_min = 0, tile_start = 0;
};

// Buckets: two gathers per pair near the query; from the distance where both bucket indices stop
// changing, the query's entry is one value per row and the key's a row of by_key read in order.
template <typename T>
struct Buckets {
  explicit Buckets(const TileAttentionLaunch& p) : launch(p), scale(static_cast<T>(p.scale)) {}
  ROFORMER_ALWAYS_INLINE void begin(int64_t b, int64_t h, int64_t i0, int64_t) {
    const int64_t S = launch.seq, R = launch.buckets, pair = b * launch.heads + h;
    query_rows = static_cast<const T*>(launch.by_query) + (pair * S + i0) * R;
    key_rows = static_cast<const T*>(launch.by_key) + pair * R * S;
    first_row = i0;
  }
  ROFORMER_ALWAYS_INLINE void tile(int64_t, int64_t) {}
  ROFORMER_ALWAYS_INLINE void output(int64_t, T*, T*) {}
  ROFORMER_ALWAYS_INLINE void add(int64_t r, int64_t i, int64_t j0, int64_t n, T* row) {
    const int64_t S = launch.seq, R = launch.buckets, from = launch.buckets_constant_from;
    const T* by_q = query_rows + r * R;
    const int64_t far = std::clamp<int64_t>(i - from - j0 + 1, 0, n);  // keys j0 + c with c < far: d >= from
    if (far > 0) {
      const T q_part = by_q[launch.query_bucket[from]];
      const T* k_part = key_rows + launch.key_bucket[from] * S + j0;
      for (int64_t c = 0; c < far; ++c) row[c] += scale * (q_part + k_part[c]);
    }
    for (int64_t c = far; c < n; ++c) {
      const int64_t d = i - j0 - c;
      row[c] += scale * (by_q[launch.query_bucket[d]] + key_rows[launch.key_bucket[d] * S + j0 + c]);
    }
  }
  const TileAttentionLaunch& launch;
  T scale;
  const T* query_rows = nullptr;
  const T* key_rows = nullptr;
  int64_t first_row = 0;
};

// PaTH: the score of query i and key j is q_i . (H_i ... H_{j+1} k_j), H_t = I - beta_t w_t w_t^T,
// so the term forms the scores (scores()) instead of the tile's product q k^T. The item's query
// rows are kept transposed, R[d][r], each row's vector at the key the walk has reached: from key
// j + 1 to key j the rows that see key j + 1 (i >= j + 1; the others still hold q_i) take
// H_{j+1}, and key j scores R . k_j. One pass over R per key does the step, the key's scores and
// the products w_j . R that the next step needs. With the forget gate, add() adds (c_i - c_j)
// times the scale.
template <typename T>
struct Path {
  using vec = typename small_gemm::Vec<T>::type;
  static constexpr int W = small_gemm::Vec<T>::width;
  static constexpr int V = kTileQueryRows / W;  // vectors per feature of R
  explicit Path(const TileAttentionLaunch& p)
      : launch(p),
        D(p.head_dim),
        stride(p.head_dim + 2),
        scale(static_cast<T>(p.scale)),
        rt(p.head_dim * kTileQueryRows) {
    for (int v = 0; v < V; ++v) t[v] = vec{};
  }
  ROFORMER_ALWAYS_INLINE void begin(int64_t b, int64_t h, int64_t i0, int64_t rows) {
    const int64_t pair = b * launch.heads + h;
    const T* q =
        static_cast<const T*>(launch.q) + b * launch.q_stride[0] + h * launch.q_stride[1] + i0 * launch.q_stride[2];
    for (int64_t d = 0; d < D; ++d)
      for (int64_t r = 0; r < kTileQueryRows; ++r)
        rt[d * kTileQueryRows + r] = r < rows ? q[r * launch.q_stride[2] + d] : T(0);
    kt = static_cast<const T*>(launch.kt) + pair * D * launch.kt_ld;
    state = static_cast<const T*>(launch.path_state) + pair * launch.seq * stride;
    first_row = i0;
    row_count = rows;
    started = false;
  }
  ROFORMER_ALWAYS_INLINE void tile(int64_t, int64_t) {}
  ROFORMER_ALWAYS_INLINE void output(int64_t, T*, T*) {}
  ROFORMER_ALWAYS_INLINE void scores(int64_t j0, int64_t width, T* out) {
    for (int64_t j = j0 + width - 1; j >= j0; --j) {
      vec coef[V];  // beta_{j+1} (w_{j+1} . R) of the rows that take H_{j+1}, else 0
      for (int v = 0; v < V; ++v) coef[v] = vec{};
      const T* w_before = state + (j + 1) * stride;  // read only after the walk's first key
      if (started) {
        const T beta = w_before[D];
        for (int v = 0; v < V; ++v) coef[v] = t[v] * beta;
        const int64_t first = j + 1 - first_row;  // rows r < first do not see key j + 1
        if (first > 0) {
          T lanes[kTileQueryRows];
          for (int v = 0; v < V; ++v) small_gemm::store(lanes + v * W, coef[v]);
          std::fill(lanes, lanes + std::min<int64_t>(first, kTileQueryRows), T(0));
          for (int v = 0; v < V; ++v) coef[v] = small_gemm::load(lanes + v * W);
        }
      }
      const T* w_here = state + j * stride;
      vec s[V], next[V];
      for (int v = 0; v < V; ++v) s[v] = next[v] = vec{};
      for (int64_t d = 0; d < D; ++d) {
        T* column = rt.data() + d * kTileQueryRows;
        const T back = started ? w_before[d] : T(0), key = kt[d * launch.kt_ld + j], ahead = w_here[d];
        for (int v = 0; v < V; ++v) {
          vec x = small_gemm::load(column + v * W);
          if (started) x -= back * coef[v];
          small_gemm::store(column + v * W, x);
          s[v] += key * x;
          next[v] += ahead * x;
        }
      }
      for (int v = 0; v < V; ++v) t[v] = next[v];
      started = true;
      T lanes[kTileQueryRows];
      for (int v = 0; v < V; ++v) small_gemm::store(lanes + v * W, s[v]);
      for (int64_t r = 0; r < row_count; ++r) out[r * kTileKeys + (j - j0)] = lanes[r];
    }
  }
  ROFORMER_ALWAYS_INLINE void add(int64_t, int64_t i, int64_t j0, int64_t n, T* row) {
    if (!launch.path_forget_gate) return;
    const T at_query = state[i * stride + D + 1];
    for (int64_t c = 0; c < n; ++c) row[c] += (at_query - state[(j0 + c) * stride + D + 1]) * scale;
  }
  const TileAttentionLaunch& launch;
  int64_t D, stride;
  T scale;
  std::vector<T> rt;  // R transposed, [D][kTileQueryRows]
  vec t[V];           // w . R at the key the walk reached, per row
  const T* kt = nullptr;
  const T* state = nullptr;
  int64_t first_row = 0, row_count = 0;
  bool started = false;
};

}  // namespace roformer::ops::tile_terms
