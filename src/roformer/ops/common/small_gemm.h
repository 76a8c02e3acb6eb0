// Register-tiled matrix products for the small per-head blocks of ops/short_attention's CPU
// kernel (a 128 x 128 x 32 product there runs at 60-80 GFLOP/s per core, about twice what the
// BLAS call ATen makes for such a block reaches). C[M, N] = sum_k A(i, k) B[k, :N]: A is read as
// scalars through two strides (so A and A^T cost the same), B as rows of vectors (unit stride
// along N), C is overwritten. N must be a multiple of 32 bytes (8 floats, 4 doubles). Vectors are
// 32 bytes, or 64 (kBytes; AVX-512, x86-64-v4 callers only: wider register tiles, and a 32-byte
// panel for the last columns).
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

// A vector of kBytes (32: 8 floats or 4 doubles; 64 on AVX-512); GCC splits it where the
// instruction set is narrower.
template <typename T, int kBytes = 32>
struct Vec {
  typedef T type __attribute__((vector_size(kBytes)));
  static constexpr int width = kBytes / static_cast<int>(sizeof(T));
};

template <int kBytes = 32, typename T>
ROFORMER_ALWAYS_INLINE typename Vec<T, kBytes>::type load(const T* p) {
  typename Vec<T, kBytes>::type v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

template <int kBytes = 32, typename T>
ROFORMER_ALWAYS_INLINE void store(T* p, typename Vec<T, kBytes>::type v) {
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
template <int R, int V, bool kAdd, int kBytes, typename T>
ROFORMER_ALWAYS_INLINE void tile(int64_t K, Strided<T> a, const T* b, int64_t ldb, T* c, int64_t ldc) {
  using vec = typename Vec<T, kBytes>::type;
  constexpr int W = Vec<T, kBytes>::width;
  vec acc[R][V];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) acc[r][v] = vec{};
  for (int64_t k = 0; k < K; ++k) {
    vec bv[V];
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) bv[v] = load<kBytes>(b + k * ldb + v * W);
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
      store<kBytes>(at, kAdd ? load<kBytes>(at) + acc[r][v] : acc[r][v]);
    }
}

// One column panel [n, n + V*W) of C for every row, R rows per tile, the rows left in tiles of 4
// and 2 (a 32-row block at R = 12 or 6 keeps every row in a multi-row tile), then one at a time.
template <int R, int V, bool kAdd, int kBytes, typename T>
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
    tile<rr, V, kAdd, kBytes>(k1 - k0, a_rows, b + k0 * ldb + n, ldb, c + m * ldc + n, ldc);
  };
  int64_t m = 0;
  for (; m + R <= M; m += R) rows(std::integral_constant<int, R>{}, m);
  if constexpr (R > 4)
    for (; m + 4 <= M; m += 4) rows(std::integral_constant<int, 4>{}, m);
  if constexpr (R > 2)
    for (; m + 2 <= M; m += 2) rows(std::integral_constant<int, 2>{}, m);
  for (; m < M; ++m) rows(std::integral_constant<int, 1>{}, m);
}

// C[:M, :N] = A[:M, :K] B[:K, :N] (or C +=, kAdd) under `limit` with diagonal offset d; N a
// multiple of 32 bytes. 32-byte vectors: panels of 4 vectors (3 rows per tile), then 2 (6 rows),
// then 1 (8 rows), 12 or 8 accumulators each (16 registers). 64-byte vectors (32 registers): 4
// vectors by 6 rows, then 2 by 12, then 1 by 8, and the last 32 bytes of a row as above.
template <typename T, bool kAdd = false, int kBytes = 32>
ROFORMER_ALWAYS_INLINE void gemm(int64_t M, int64_t N, int64_t K, Strided<T> a, const T* b, int64_t ldb, T* c,
                                 int64_t ldc, Limit limit = Limit::none, int64_t d = 0) {
  constexpr int W = Vec<T, kBytes>::width;
  constexpr bool wide = kBytes == 64;
  int64_t n = 0;
  for (; n + 4 * W <= N; n += 4 * W) panel<wide ? 6 : 3, 4, kAdd, kBytes>(M, K, a, b, ldb, c, ldc, n, limit, d);
  for (; n + 2 * W <= N; n += 2 * W) panel<wide ? 12 : 6, 2, kAdd, kBytes>(M, K, a, b, ldb, c, ldc, n, limit, d);
  for (; n + W <= N; n += W) panel<8, 1, kAdd, kBytes>(M, K, a, b, ldb, c, ldc, n, limit, d);
  if constexpr (wide) {
    if (n < N)  // the last 32 bytes, their columns from n (the causal column limit's offset moves with them)
      gemm<T, kAdd, 32>(M, N - n, K, a, b + n, ldb, c + n, ldc, limit, limit == Limit::columns_to_row_end ? d - n : d);
  }
}

// gemm with the choice of writing C or adding to it made at run time (a gradient's first share
// written, the rest added).
template <typename T, int kBytes = 32>
ROFORMER_ALWAYS_INLINE void gemm_set_or_add(bool add, int64_t M, int64_t N, int64_t K, Strided<T> a, const T* b,
                                            int64_t ldb, T* c, int64_t ldc, Limit limit = Limit::none, int64_t d = 0) {
  if (add) {
    gemm<T, true, kBytes>(M, N, K, a, b, ldb, c, ldc, limit, d);
  } else {
    gemm<T, false, kBytes>(M, N, K, a, b, ldb, c, ldc, limit, d);
  }
}

}  // namespace roformer::ops::small_gemm

#pragma GCC diagnostic pop
