// PaTH's tile term in the CPU loop. The score of query i and key j is q_i . (H_i ... H_{j+1} k_j),
// so the term forms the tile's scores (scores()) instead of the product q k^T.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <vector>

#include "roformer/ops/common/small_gemm.h"
#include "roformer/ops/tile_attention/terms/path_kernel.h"
#include "roformer/ops/tile_attention/tile_attention_loop.h"

namespace roformer::ops {
namespace path_tiles {

// The score of query i and key j is q_i . (H_i ... H_{j+1} k_j), H_t = I - beta_t w_t w_t^T,
// so the term forms the scores (scores()) instead of the tile's product q k^T. The item's query
// rows are kept transposed, R[d][r], each row's vector at the key the walk has reached: from key
// j + 1 to key j the rows that see key j + 1 (i >= j + 1; the others still hold q_i) take
// H_{j+1}, and key j scores R . k_j. One pass over R per key does the step, the key's scores and
// the products w_j . R that the next step needs. With the forget gate, add() adds (c_i - c_j)
// times the scale.
template <typename T, int kBytes = 32>
struct Path {
  using vec = typename small_gemm::Vec<T>::type;
  static constexpr int W = small_gemm::Vec<T>::width;
  static constexpr int V = kTileQueryRows / W;  // vectors per feature of R
  Path(const TileAttentionLaunch& p, const void* tables)
      : launch(p),
        path(*static_cast<const PathTables*>(tables)),
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
    state = static_cast<const T*>(path.state) + pair * launch.seq * stride;
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
    if (!path.forget_gate) return;
    const T at_query = state[i * stride + D + 1];
    for (int64_t c = 0; c < n; ++c) row[c] += (at_query - state[(j0 + c) * stride + D + 1]) * scale;
  }
  const TileAttentionLaunch& launch;
  const PathTables& path;
  int64_t D, stride;
  T scale;
  std::vector<T> rt;  // R transposed, [D][kTileQueryRows]
  vec t[V];           // w . R at the key the walk reached, per row
  const T* kt = nullptr;
  const T* state = nullptr;
  int64_t first_row = 0, row_count = 0;
  bool started = false;
};

}  // namespace path_tiles

ROFORMER_TILE_TERM_ITEMS(path_items, path_tiles::Path)

}  // namespace roformer::ops
