// Register-tiled matrix products for the small per-head blocks of ops/short_attention's CPU
// kernel (a 128 x 128 x 32 product there runs at 60-80 GFLOP/s per core, about twice what the
// BLAS call ATen makes for such a block reaches). C[M, N] = sum_k A(i, k) B[k, :N]: A is read as
// scalars through two strides (so A and A^T cost the same), B as rows of vectors (unit stride
// along N), C is overwritten. N must be a multiple of the vector width (8 floats, 4 doubles).
// Causal products limit, per block of R rows starting at row m, the columns (n < m + d + R) or the
// summed range (k < m + d + R, or k >= m + d), d the diagonal's offset (0 for a whole square; a
// block of query rows from i0 has d = i0, its transpose d = -i0); the rest of C is left for the
// caller. C is overwritten, or added to (kAdd: the accumulated gradients of a block). Header-only and
// always inlined, so each ROFORMER_CLONES caller gets it compiled for its instruction set.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "roformer/ops/common/cpu_kernel_support.h"

// The helpers pass 32-byte vectors by value; they are always inlined, so no call crosses an ABI
// (GCC warns for the baseline clone, which has no AVX registers).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace roformer::ops::small_gemm {

// A 32-byte vector of T (8 floats or 4 doubles); GCC splits it into two where SSE2 is all there is.
template <typename T>
struct Vec {
  typedef T type __attribute__((vector_size(32)));
  static constexpr int width = 32 / static_cast<int>(sizeof(T));
};

template <typename T>
ROFORMER_ALWAYS_INLINE typename Vec<T>::type load(const T* p) {
  typename Vec<T>::type v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

template <typename T>
ROFORMER_ALWAYS_INLINE void store(T* p, typename Vec<T>::type v) {
  std::memcpy(p, &v, sizeof(v));
}

// A strided matrix view: element (i, j) at data[i * row_stride + j * col_stride].
template <typename T>
struct Strided {
  const T* data;
  int64_t row_stride;
  int64_t col_stride;
  ROFORMER_ALWAYS_INLINE const T* at(int64_t i, int64_t j) const { return data + i * row_stride + j * col_stride; }
};

// Which part of a product a causal attention block needs (see the header comment).
enum class Limit { none, columns_to_row_end, sum_to_row_end, sum_from_row };

// C[r, :V*W] = sum_{k < K} A(r, k) B[k, :V*W] for r < R: R x V vector accumulators in registers.
template <int R, int V, bool kAdd, typename T>
ROFORMER_ALWAYS_INLINE void tile(int64_t K, Strided<T> a, const T* b, int64_t ldb, T* c, int64_t ldc) {
  using vec = typename Vec<T>::type;
  constexpr int W = Vec<T>::width;
  vec acc[R][V];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) acc[r][v] = vec{};
  for (int64_t k = 0; k < K; ++k) {
    vec bv[V];
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) bv[v] = load(b + k * ldb + v * W);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const vec av = *a.at(r, k) - vec{};  // broadcast
#pragma GCC unroll 16
      for (int v = 0; v < V; ++v) acc[r][v] += av * bv[v];
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) {
      T* at = c + r * ldc + v * W;
      store(at, kAdd ? load(at) + acc[r][v] : acc[r][v]);
    }
}

// One column panel [n, n + V*W) of C for every row, R rows per tile, one row at a time at the end.
template <int R, int V, bool kAdd, typename T>
ROFORMER_ALWAYS_INLINE void panel(int64_t M, int64_t K, Strided<T> a, const T* b, int64_t ldb, T* c, int64_t ldc,
                                  int64_t n, Limit limit, int64_t d) {
  // Always inlined like the rest, so it is compiled for the caller's instruction set.
  auto rows = [&](auto tile_rows, int64_t m) __attribute__((always_inline)) {
    constexpr int rr = decltype(tile_rows)::value;
    int64_t k0 = 0, k1 = K;
    if (limit == Limit::columns_to_row_end && n >= m + d + rr) return;
    if (limit == Limit::sum_to_row_end) k1 = std::clamp<int64_t>(m + d + rr, 0, K);
    if (limit == Limit::sum_from_row) k0 = std::clamp<int64_t>(m + d, 0, K);
    const Strided<T> a_rows{a.at(m, k0), a.row_stride, a.col_stride};
    tile<rr, V, kAdd>(k1 - k0, a_rows, b + k0 * ldb + n, ldb, c + m * ldc + n, ldc);
  };
  int64_t m = 0;
  for (; m + R <= M; m += R) rows(std::integral_constant<int, R>{}, m);
  for (; m < M; ++m) rows(std::integral_constant<int, 1>{}, m);
}

// C[:M, :N] = A[:M, :K] B[:K, :N] (or C +=, kAdd) under `limit` with diagonal offset d; N a
// multiple of the vector width. Panels of 4 vectors (3 rows per tile), then 2 (6 rows), then 1 (8
// rows): 12 or 8 accumulators each.
template <typename T, bool kAdd = false>
ROFORMER_ALWAYS_INLINE void gemm(int64_t M, int64_t N, int64_t K, Strided<T> a, const T* b, int64_t ldb, T* c,
                                 int64_t ldc, Limit limit = Limit::none, int64_t d = 0) {
  constexpr int W = Vec<T>::width;
  int64_t n = 0;
  for (; n + 4 * W <= N; n += 4 * W) panel<3, 4, kAdd>(M, K, a, b, ldb, c, ldc, n, limit, d);
  for (; n + 2 * W <= N; n += 2 * W) panel<6, 2, kAdd>(M, K, a, b, ldb, c, ldc, n, limit, d);
  for (; n + W <= N; n += W) panel<8, 1, kAdd>(M, K, a, b, ldb, c, ldc, n, limit, d);
}

}  // namespace roformer::ops::small_gemm

#pragma GCC diagnostic pop
