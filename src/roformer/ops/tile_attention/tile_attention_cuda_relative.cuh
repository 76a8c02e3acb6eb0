// A relative table in CUDA tile attention (Transformer-XL's projected sinusoids, Shaw's a^K and
// a^V; TileCudaRelative), for the relative walk of tile_attention_cuda_kernels.cuh. A warp's 16
// rows and a tile's keys meet at 16 + kKeys - 1 distances, so the warp forms one product of its
// rows' term queries with the table rows of that span (the tensor cores as for q . k, the table
// read from global memory, where the four warps' spans overlap in cache) and moves each pair's
// entry to its score's place through its weights region in shared memory (the skew of
// Transformer-XL's "relative shift"). Shaw's value table goes the other way: the weights, skewed
// onto the span, times the value rows of the span. Unnamed namespace, as tile_attention_cuda_blocks.cuh.
#pragma once

#include <cstdint>

#include "roformer/ops/tile_attention/tile_attention_cuda_blocks.cuh"

namespace roformer::ops {
namespace {  // NOLINT(build/namespaces): per including file, see tile_attention_cuda_blocks.cuh

namespace tile_cuda {

// The span of distances of a warp's rows and a tile's keys, padded to whole 16-wide fragments: span
// column m is distance span_base + m, so the warp's row r and the tile's key column c sit at
// m = r - c + kKeys - 1.
template <typename T>
constexpr int kSpan = (16 + kKeys<T> - 1 + 15) / 16 * 16;

__device__ __forceinline__ int64_t span_base(const Place& at, int64_t j0, int keys) {
  return at.first_row + 16 * at.warp - j0 - (keys - 1);
}

// The table row of span column m, clamped into the table's origin + S rows: a row outside them
// belongs only to pairs the mask hides (a key after the query, causal; a row or key past S).
__device__ __forceinline__ int64_t span_row(const TileCudaLaunch& p, int64_t base, int m) {
  const int64_t row = p.relative.origin + base + m, last = p.relative.origin + p.seq - 1;
  return row < 0 ? 0 : row > last ? last : row;
}

// One span fragment's products (span columns 8 nb + 2t, + 1 of rows g and g + 8, as tile_scores
// lays a fragment out) moved to their pairs' places in the warp's [16][kKeys + 1] region.
template <typename T, int D>
__device__ __forceinline__ void skew_to_pairs(const Place& at, int nb, const typename Acc<T>::type (&r)[4],
                                              typename Acc<T>::type* region) {
  constexpr int ld = SharedLayout<T, D>::weight_ld;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int row = at.g + 8 * (e >> 1), c = row - (8 * nb + 2 * at.t + (e & 1)) + kKeys<T> - 1;
    if (c >= 0 && c < kKeys<T>) region[row * ld + c] = r[e];
  }
}

// s += q_rel_i . table[origin + i - j] for the warp's pairs of the tile at j0, before the scale
// (the tensor cores take the term queries' fragments ra; the CUDA cores read their rows).
template <typename T, int D>
__device__ __forceinline__ void add_relative_scores(const TileCudaLaunch& p, const Place& at, int64_t j0,
                                                    const uint32_t (*ra)[4], unsigned char* smem,
                                                    typename Acc<T>::type (&s)[kKeys<T> / 8][4]) {
  using acc_t = typename Acc<T>::type;
  constexpr int ld = SharedLayout<T, D>::weight_ld;
  acc_t* region = warp_weights<T, D>(smem, at.warp);
  const int64_t base = span_base(at, j0, kKeys<T>);
  const T* table = static_cast<const T*>(p.relative.table) + at.h * p.relative.table_head_stride;
  if constexpr (kTensorCores<T>) {
    [[maybe_unused]] constexpr int kUnrolled = D <= 64 ? kSpan<T> / 8 : 1;  // D = 128 spills unrolled (ptxas -v, sm_90)
#pragma unroll kUnrolled
    for (int nb = 0; nb < kSpan<T> / 8; ++nb) {
      acc_t r[4] = {0, 0, 0, 0};
      const T* row = table + span_row(p, base, 8 * nb + at.g) * D + 2 * at.t;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const uint32_t b[2] = {cuda_mma::load2(row + 16 * kk), cuda_mma::load2(row + 16 * kk + 8)};
        cuda_mma::mma_16816<T>(r, ra[kk], b);
      }
      skew_to_pairs<T, D>(at, nb, r, region);
    }
  } else {
    const Rows<T> queries =
        rows_of<T>(p.relative.q, p.relative.q_stride[0], p.relative.q_stride[1], p.relative.q_stride[2], at);
    const bool live0 = at.row(0) < p.seq, live1 = at.row(1) < p.seq;
    const T* q0 = queries.data + (live0 ? at.row(0) : 0) * queries.stride;
    const T* q1 = queries.data + (live1 ? at.row(1) : 0) * queries.stride;
    acc_t r[kSpan<T> / 8][4] = {};
    for (int d = 0; d < D; ++d) {
      const acc_t a0 = live0 ? to_acc(q0[d]) : acc_t(0), a1 = live1 ? to_acc(q1[d]) : acc_t(0);
#pragma unroll
      for (int nb = 0; nb < kSpan<T> / 8; ++nb) {
        const acc_t t0 = to_acc(table[span_row(p, base, 8 * nb + 2 * at.t) * D + d]),
                    t1 = to_acc(table[span_row(p, base, 8 * nb + 2 * at.t + 1) * D + d]);
        r[nb][0] += a0 * t0;
        r[nb][1] += a0 * t1;
        r[nb][2] += a1 * t0;
        r[nb][3] += a1 * t1;
      }
    }
#pragma unroll
    for (int nb = 0; nb < kSpan<T> / 8; ++nb) skew_to_pairs<T, D>(at, nb, r[nb], region);
  }
  __syncwarp();  // every pair's entry in place
#pragma unroll
  for (int n = 0; n < kKeys<T> / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[n][e] += region[(at.g + 8 * (e >> 1)) * ld + 8 * n + 2 * at.t + (e & 1)];
  __syncwarp();  // read before the region is written again
}

// o += sum_j w_ij value[origin + i - j] over the tile at j0 (weights s as tile_scores lays them
// out). The CUDA cores read the weights add_weighted_values left in the warp's region; the tensor
// cores skew them onto the span there (as 16-bit values, rounded as add_weighted_values rounds
// them) and take their product with the span's value rows.
template <typename T, int D>
__device__ __forceinline__ void add_relative_values(const TileCudaLaunch& p, const Place& at, int64_t j0,
                                                    unsigned char* smem,
                                                    const typename Acc<T>::type (&s)[kKeys<T> / 8][4],
                                                    typename Acc<T>::type (&o)[D / 8][4]) {
  using acc_t = typename Acc<T>::type;
  const int64_t base = span_base(at, j0, kKeys<T>);
  const T* value = static_cast<const T*>(p.relative.value) + at.h * p.relative.value_head_stride;
  if constexpr (kTensorCores<T>) {
    T* spread = reinterpret_cast<T*>(warp_weights<T, D>(smem, at.warp));  // [16][kSpan]
    const int lane = threadIdx.x % 32;
    for (int e = lane; e < 16 * kSpan<T>; e += 32) spread[e] = cuda_elem::from_acc<T>(0.0f);
    __syncwarp();
#pragma unroll
    for (int n = 0; n < kKeys<T> / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = at.g + 8 * (e >> 1), m = row - (8 * n + 2 * at.t + (e & 1)) + kKeys<T> - 1;
        spread[row * kSpan<T> + m] = cuda_elem::from_acc<T>(s[n][e]);
      }
    __syncwarp();
#pragma unroll 1
    for (int kk = 0; kk < kSpan<T> / 16; ++kk) {
      const T* a_row = spread + at.g * kSpan<T> + 16 * kk + 2 * at.t;
      const uint32_t a[4] = {cuda_mma::load2(a_row), cuda_mma::load2(a_row + 8 * kSpan<T>), cuda_mma::load2(a_row + 8),
                             cuda_mma::load2(a_row + 8 * kSpan<T> + 8)};
      const int m = 16 * kk + 2 * at.t;
      const T *v0 = value + span_row(p, base, m) * D, *v1 = value + span_row(p, base, m + 1) * D;
      const T *v8 = value + span_row(p, base, m + 8) * D, *v9 = value + span_row(p, base, m + 9) * D;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        const int col = 8 * n + at.g;
        const uint32_t b[2] = {cuda_mma::pack2<T>(to_acc(v0[col]), to_acc(v1[col])),
                               cuda_mma::pack2<T>(to_acc(v8[col]), to_acc(v9[col]))};
        cuda_mma::mma_16816<T>(o[n], a, b);
      }
    }
    __syncwarp();  // read before the region is written again
  } else {
    constexpr int ld = SharedLayout<T, D>::weight_ld;
    const acc_t* weights = warp_weights<T, D>(smem, at.warp);
    for (int c = 0; c < kKeys<T>; ++c) {
      const acc_t w0 = weights[at.g * ld + c], w1 = weights[(at.g + 8) * ld + c];
      const T* v0 = value + span_row(p, base, at.g - c + kKeys<T> - 1) * D + 2 * at.t;
      const T* v1 = value + span_row(p, base, at.g + 8 - c + kKeys<T> - 1) * D + 2 * at.t;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        o[n][0] += w0 * to_acc(v0[8 * n]);
        o[n][1] += w0 * to_acc(v0[8 * n + 1]);
        o[n][2] += w1 * to_acc(v1[8 * n]);
        o[n][3] += w1 * to_acc(v1[8 * n + 1]);
      }
    }
    __syncwarp();  // read before the region is written again
  }
}

}  // namespace tile_cuda
}  // namespace
}  // namespace roformer::ops
