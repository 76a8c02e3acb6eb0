// The building blocks of CUDA tile attention's kernel (tile_attention_cuda_kernels.cuh), for nvcc
// and a host compiler (the host-emulation tests, through cuda_elem.cuh): a block of four warps
// takes 64 query rows of one (batch, head), each warp 16 of them. Here: where a thread stands,
// the staging of a key tile (keys, and values transposed for the tensor cores) in shared memory,
// each warp's scores of its 16 rows in the tensor-core fragment layout (cuda_mma.cuh; bf16 and
// fp16 by mma.sync with q's fragments held in registers; float32 and float64 by the same layout
// on the CUDA cores), the family's term per score, the product of the weights with the values, and
// RoPE's remaps (each pair's own product). Each thread holds two rows' scores and outputs, so no
// score leaves the registers on the tensor-core path. Everything lives in an unnamed namespace:
// each including file gets its own copies (see rope_cuda_kernels.cuh). No LibTorch headers.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "roformer/ops/common/cuda_elem.cuh"
#include "roformer/ops/common/cuda_mma.cuh"
#include "roformer/ops/tile_attention/tile_attention_cuda_launch.h"

namespace roformer::ops {
namespace {  // NOLINT(build/namespaces): per including file, see above

namespace tile_cuda {

using cuda_elem::Acc;
using cuda_elem::from_acc;
using cuda_elem::to_acc;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
static_assert(kTileCudaRows == 16 * kWarps, "a warp takes 16 query rows");

template <typename T>
constexpr bool kTensorCores = std::is_same<T, __nv_bfloat16>::value || std::is_same<T, __half>::value;

// Keys per tile: 64 for the tensor cores, fewer for the wider types (shared memory under 48 KiB).
template <typename T>
constexpr int kKeys = kTensorCores<T> ? 64 : (sizeof(T) == 4 ? 32 : 16);

// Shared memory, in elements: keys [kKeys][D + kPad]; the tensor cores' values transposed
// [D][kKeys + 8], the CUDA cores' as rows [kKeys][D] and each warp's weights [16][kKeys + 1].
// The relative tables' walk gives each warp such a weights region on the tensor cores too
// (relative_bytes; over 48 KiB at bf16 D = 128, so its launch opts in).
template <typename T>
constexpr int kPad = kTensorCores<T> ? 8 : 1;
template <typename T, int D>
struct SharedLayout {
  using acc_t = typename Acc<T>::type;
  using elem = std::conditional_t<kTensorCores<T>, T, acc_t>;
  static constexpr int key_ld = D + kPad<T>;
  static constexpr int value_ld = kTensorCores<T> ? kKeys<T> + 8 : D;
  static constexpr int weight_ld = kKeys<T> + 1;
  static constexpr int keys = kKeys<T> * key_ld;
  static constexpr int values = kTensorCores<T> ? D * value_ld : kKeys<T> * D;
  static constexpr int weights = kTensorCores<T> ? 0 : kWarps * 16 * weight_ld;
  static constexpr size_t bytes = sizeof(elem) * (keys + values) + sizeof(acc_t) * weights;
  static constexpr size_t relative_bytes = sizeof(elem) * (keys + values) + sizeof(acc_t) * kWarps * 16 * weight_ld;
};

// A warp's weights region [16][kKeys + 1] in the accumulation type (see SharedLayout).
template <typename T, int D>
__device__ __forceinline__ typename Acc<T>::type* warp_weights(unsigned char* smem, int warp) {
  using L = SharedLayout<T, D>;
  return reinterpret_cast<typename Acc<T>::type*>(smem + sizeof(typename L::elem) * (L::keys + L::values)) +
         warp * 16 * L::weight_ld;
}

__device__ __forceinline__ float exp2_of(float x) {
  return exp2f(x);
}
__device__ __forceinline__ double exp2_of(double x) {
  return exp2(x);
}

// Where a block and a thread stand: (b, h), the warp's rows, the thread's two rows (g, g + 8 of
// the warp's 16) and its pair of columns in each 8-wide fragment (2t, 2t + 1).
struct Place {
  int64_t b = 0, h = 0, first_row = 0, length = 0, key_end = 0;  // length: the keys row b has
  int warp = 0, g = 0, t = 0;
  __device__ __forceinline__ int64_t row(int r) const { return first_row + 16 * warp + g + 8 * r; }
};

__device__ __forceinline__ Place place_of(const TileCudaLaunch& p) {
  Place at;
  const int64_t pairs = p.batch * p.heads, tiles = (p.seq + kTileCudaRows - 1) / kTileCudaRows;
  const int64_t pair = blockIdx.x % pairs;
  at.b = pair / p.heads;
  at.h = pair % p.heads;
  at.first_row = (tiles - 1 - blockIdx.x / pairs) * kTileCudaRows;  // the longest rows first
  at.length = p.key_lengths ? p.key_lengths[at.b] : p.seq;
  const int64_t last = at.first_row + kTileCudaRows;
  at.key_end = p.causal && last < at.length ? last : at.length;
  if (at.key_end > p.seq) at.key_end = p.seq;
  const int lane = threadIdx.x % 32;
  at.warp = threadIdx.x / 32;
  at.g = lane / 4;
  at.t = lane % 4;
  return at;
}

// FIRE's term of a pair at distance d >= 0 on one side of row i (the side's fields passed as values:
// a reference chosen at run time would copy the launch out of parameter memory).
template <typename acc_t>
__device__ __forceinline__ acc_t fire_term(const acc_t* psi, const acc_t* denominator, const acc_t* kinks,
                                           int64_t kink_count, const acc_t* slope, const acc_t* intercept, int64_t h,
                                           int64_t i, int64_t d) {
  const acc_t x = psi[d] / denominator[i];
  int64_t below = 0, count = kink_count;  // bisection: the kinks below x
  while (count > 0) {
    const int64_t half = count / 2;
    if (kinks[below + half] < x) {
      below += half + 1;
      count -= half + 1;
    } else {
      count = half;
    }
  }
  const int64_t at = h * (kink_count + 1) + below;
  return slope[at] * x + intercept[at];
}

// The score of row i and key j after the scale and the term, in log2 units; -inf where hidden.
template <typename acc_t>
__device__ __forceinline__ acc_t scored(const TileCudaLaunch& p, const Place& at, int64_t i, int64_t j, acc_t dot) {
  if (i >= p.seq || j >= at.length || (p.causal && j > i)) return -std::numeric_limits<acc_t>::infinity();
  if (p.term == TileCudaTerm::buckets) {  // inside the scale, as DeBERTa adds c2p and p2c to q . k
    const TileCudaBuckets& t = p.buckets;
    const int64_t pair = at.b * p.heads + at.h, d = i - j;
    dot += static_cast<const acc_t*>(t.by_query)[(pair * p.seq + i) * t.buckets + t.query_bucket[d]] +
           static_cast<const acc_t*>(t.by_key)[(pair * t.buckets + t.key_bucket[d]) * p.seq + j];
  }
  acc_t s = dot * static_cast<acc_t>(p.scale);
  if (p.term == TileCudaTerm::bias_rows) {
    s += static_cast<const acc_t*>(p.bias)[at.h * p.bias_head_stride + (p.seq - 1) + j - i];
  } else if (p.term == TileCudaTerm::fox) {
    const acc_t* c = static_cast<const acc_t*>(p.cumulative) + (at.b * p.heads + at.h) * p.seq;
    const acc_t decay = c[i] - c[j];
    s += p.causal ? decay : -(decay < 0 ? -decay : decay);
  } else if (p.term == TileCudaTerm::fire) {
    const bool past = j <= i;
    auto pick = [past](const void* a, const void* b) { return static_cast<const acc_t*>(past ? a : b); };
    const TileCudaFireSide &before = p.fire.past, &after = p.fire.future;
    s += fire_term<acc_t>(static_cast<const acc_t*>(p.fire.psi), pick(before.denominator, after.denominator),
                          pick(before.kinks, after.kinks), past ? before.kink_count : after.kink_count,
                          pick(before.slope, after.slope), pick(before.intercept, after.intercept), at.h, i,
                          past ? i - j : j - i);
  }
  return s * static_cast<acc_t>(1.4426950408889634);  // log2(e)
}

// A [B, H, S, D] tensor of the launch (D: 1) at the block's (b, h): its rows and their stride.
template <typename T>
struct Rows {
  const T* data;
  int64_t stride;
};
template <typename T>
__device__ __forceinline__ Rows<T> rows_of(const void* data, int64_t batch_stride, int64_t head_stride,
                                           int64_t row_stride, const Place& at) {
  return {static_cast<const T*>(data) + at.b * batch_stride + at.h * head_stride, row_stride};
}

// Keys [j0, j0 + kKeys) of `keys_in` into shared memory (zero past key_end), and with `values` the
// launch's values too: rows for the keys; the values transposed (tensor cores) or as rows.
template <typename T, int D>
__device__ __forceinline__ void stage_tile(const TileCudaLaunch& p, const Place& at, int64_t j0, Rows<T> keys_in,
                                           bool with_values, unsigned char* smem) {
  using L = SharedLayout<T, D>;
  using elem = typename L::elem;
  elem* keys = reinterpret_cast<elem*>(smem);
  elem* values = keys + L::keys;
  const Rows<T> v = rows_of<T>(p.v, p.v_stride[0], p.v_stride[1], p.v_stride[2], at);
  for (int e = threadIdx.x; e < kKeys<T> * D; e += kThreads) {
    const int r = e / D, c = e % D;
    const int64_t j = j0 + r;
    const bool live = j < at.key_end;
    keys[r * L::key_ld + c] = live ? static_cast<elem>(keys_in.data[j * keys_in.stride + c]) : elem(0.0f);
    if (!with_values) continue;
    const elem vv = live ? static_cast<elem>(v.data[j * v.stride + c]) : elem(0.0f);
    if constexpr (kTensorCores<T>) {
      values[c * L::value_ld + r] = vv;
    } else {
      values[r * L::value_ld + c] = vv;
    }
  }
}

// The warp's scores of the staged tile: s[n][e], rows g (e < 2) and g + 8, column 8n + 2t + e % 2.
// The tensor cores take the queries' fragments qa; the CUDA cores read their rows from `queries`.
template <typename T, int D>
__device__ __forceinline__ void tile_scores(const TileCudaLaunch& p, const Place& at, const uint32_t (*qa)[4],
                                            Rows<T> queries, const unsigned char* smem,
                                            typename Acc<T>::type (&s)[kKeys<T> / 8][4]) {
  using L = SharedLayout<T, D>;
  using acc_t = typename Acc<T>::type;
  const auto* keys = reinterpret_cast<const typename L::elem*>(smem);
  for (int n = 0; n < kKeys<T> / 8; ++n)
    for (int e = 0; e < 4; ++e) s[n][e] = 0;
  if constexpr (kTensorCores<T>) {
#pragma unroll
    for (int n = 0; n < kKeys<T> / 8; ++n) {
      const T* key = keys + (8 * n + at.g) * L::key_ld + 2 * at.t;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const uint32_t b[2] = {cuda_mma::load2(key + 16 * kk), cuda_mma::load2(key + 16 * kk + 8)};
        cuda_mma::mma_16816<T>(s[n], qa[kk], b);
      }
    }
  } else {
    const bool live0 = at.row(0) < p.seq, live1 = at.row(1) < p.seq;
    const T* q0 = queries.data + (live0 ? at.row(0) : 0) * queries.stride;
    const T* q1 = queries.data + (live1 ? at.row(1) : 0) * queries.stride;
    for (int d = 0; d < D; ++d) {
      const acc_t a0 = live0 ? to_acc(q0[d]) : acc_t(0), a1 = live1 ? to_acc(q1[d]) : acc_t(0);
#pragma unroll
      for (int n = 0; n < kKeys<T> / 8; ++n) {
        const acc_t k0 = keys[(8 * n + 2 * at.t) * L::key_ld + d], k1 = keys[(8 * n + 2 * at.t + 1) * L::key_ld + d];
        s[n][0] += a0 * k0;
        s[n][1] += a0 * k1;
        s[n][2] += a1 * k0;
        s[n][3] += a1 * k1;
      }
    }
  }
}

// The queries' fragments of the warp's rows (tensor cores): qa[kk] for columns [16 kk, 16 kk + 16),
// zero past S.
template <typename T, int D>
__device__ __forceinline__ void load_query_fragments(const TileCudaLaunch& p, const Place& at, Rows<T> queries,
                                                     uint32_t (*qa)[4]) {
  for (int r = 0; r < 2; ++r) {
    const bool live = at.row(r) < p.seq;
    const T* row = queries.data + (live ? at.row(r) : 0) * queries.stride + 2 * at.t;
    for (int kk = 0; kk < D / 16; ++kk) {
      qa[kk][r] = live ? cuda_mma::load2(row + 16 * kk) : 0u;
      qa[kk][r + 2] = live ? cuda_mma::load2(row + 16 * kk + 8) : 0u;
    }
  }
}

// The four lanes of a row group (same g) combined: their maximum or their sum.
template <typename A>
__device__ __forceinline__ A group_max(A x) {
  for (int m = 1; m < 4; m <<= 1) {
    const A o = __shfl_xor_sync(0xffffffffu, x, m);
    x = o > x ? o : x;
  }
  return x;
}
template <typename A>
__device__ __forceinline__ A group_sum(A x) {
  for (int m = 1; m < 4; m <<= 1) x += __shfl_xor_sync(0xffffffffu, x, m);
  return x;
}

// out += weights x values of the staged tile for the warp's rows (weights s as tile_scores lays them out).
template <typename T, int D>
__device__ __forceinline__ void add_weighted_values(const Place& at, unsigned char* smem,
                                                    const typename Acc<T>::type (&s)[kKeys<T> / 8][4],
                                                    typename Acc<T>::type (&o)[D / 8][4]) {
  using L = SharedLayout<T, D>;
  using acc_t = typename Acc<T>::type;
  using elem = typename L::elem;
  const elem* values = reinterpret_cast<const elem*>(smem) + L::keys;
  if constexpr (kTensorCores<T>) {
#pragma unroll
    for (int kk = 0; kk < kKeys<T> / 16; ++kk) {
      const uint32_t a[4] = {cuda_mma::pack2<T>(s[2 * kk][0], s[2 * kk][1]),
                             cuda_mma::pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                             cuda_mma::pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             cuda_mma::pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        const T* column = values + (8 * n + at.g) * L::value_ld + 16 * kk + 2 * at.t;
        const uint32_t b[2] = {cuda_mma::load2(column), cuda_mma::load2(column + 8)};
        cuda_mma::mma_16816<T>(o[n], a, b);
      }
    }
  } else {
    acc_t* weights = warp_weights<T, D>(smem, at.warp);
    for (int n = 0; n < kKeys<T> / 8; ++n)
      for (int e = 0; e < 4; ++e) weights[(at.g + 8 * (e >> 1)) * L::weight_ld + 8 * n + 2 * at.t + (e & 1)] = s[n][e];
    __syncthreads();  // the warp's weights written (every warp runs the same tiles)
    for (int j = 0; j < kKeys<T>; ++j) {
      const acc_t w0 = weights[at.g * L::weight_ld + j], w1 = weights[(at.g + 8) * L::weight_ld + j];
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        const acc_t v0 = values[j * L::value_ld + 8 * n + 2 * at.t],
                    v1 = values[j * L::value_ld + 8 * n + 2 * at.t + 1];
        o[n][0] += w0 * v0;
        o[n][1] += w0 * v1;
        o[n][2] += w1 * v0;
        o[n][3] += w1 * v1;
      }
    }
  }
}

// Which product scores the pair (i, j): 0 q . k, 1 mid_q . k, 2 far_q . far_k (see the launch).
__device__ __forceinline__ int product_of(const TileCudaLaunch& p, int64_t i, int64_t j) {
  if (p.chunk > 0) {
    const int64_t gap = i / p.chunk - j / p.chunk;
    return gap <= 0 ? 0 : gap == 1 ? 1 : 2;
  }
  return p.far_q && i - j >= p.far_from ? 2 : 0;
}

// The products some pair of rows [i0, i1] and keys [j0, j1] takes, as bits 1 << product_of.
__device__ __forceinline__ unsigned products_between(const TileCudaLaunch& p, int64_t i0, int64_t i1, int64_t j0,
                                                     int64_t j1) {
  if (p.chunk > 0) {
    const int64_t low = i0 / p.chunk - j1 / p.chunk, high = i1 / p.chunk - j0 / p.chunk;
    return (low <= 0 ? 1u : 0u) | (low <= 1 && high >= 1 ? 2u : 0u) | (high >= 2 ? 4u : 0u);
  }
  if (!p.far_q) return 1u;
  return (i0 - j1 < p.far_from ? 1u : 0u) | (i1 - j0 >= p.far_from ? 4u : 0u);
}

// The warp's raw scores of the tile at j0 whose keys and values are staged: q . k, or with
// rotations each pair's own product (the far keys staged over the keys when a warp of the block
// needs them; every thread of the block calls this, for its barriers).
template <typename T, int D>
__device__ __forceinline__ void rotated_scores(const TileCudaLaunch& p, const Place& at, int64_t j0,
                                               const uint32_t (*qa)[4], unsigned char* smem,
                                               typename Acc<T>::type (&s)[kKeys<T> / 8][4]) {
  using acc_t = typename Acc<T>::type;
  constexpr int N = kKeys<T> / 8;
  const int64_t j1 = j0 + kKeys<T> - 1, warp_row = at.first_row + 16 * at.warp;
  const unsigned warp_needs = products_between(p, warp_row, warp_row + 15, j0, j1);
  const unsigned block_needs = products_between(p, at.first_row, at.first_row + kTileCudaRows - 1, j0, j1);
#pragma unroll
  for (int n = 0; n < N; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[n][e] = 0;
#pragma unroll
  for (int kind = 0; kind < 3; ++kind) {
    if (kind == 2 && (block_needs & 4u)) {  // the far keys over the keys: every warp is past them
      __syncthreads();
      stage_tile<T, D>(p, at, j0, rows_of<T>(p.far_k, p.far_k_stride[0], p.far_k_stride[1], p.far_k_stride[2], at),
                       false, smem);
      __syncthreads();
    }
    if (!(warp_needs & (1u << kind))) continue;
    acc_t t[N][4];
    if (kind == 0) {
      tile_scores<T, D>(p, at, qa, rows_of<T>(p.q, p.q_stride[0], p.q_stride[1], p.q_stride[2], at), smem, t);
    } else {  // the middle or far queries' fragments, loaded for this tile
      const Rows<T> queries = kind == 1
                                  ? rows_of<T>(p.mid_q, p.mid_q_stride[0], p.mid_q_stride[1], p.mid_q_stride[2], at)
                                  : rows_of<T>(p.far_q, p.far_q_stride[0], p.far_q_stride[1], p.far_q_stride[2], at);
      uint32_t own[kTensorCores<T> ? D / 16 : 1][4];
      if constexpr (kTensorCores<T>) load_query_fragments<T, D>(p, at, queries, own);
      tile_scores<T, D>(p, at, own, queries, smem, t);
    }
    const bool alone = warp_needs == (1u << kind);  // every pair of the warp's tile takes this product
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (alone || product_of(p, at.row(e >> 1), j0 + 8 * n + 2 * at.t + (e & 1)) == kind) s[n][e] = t[n][e];
  }
}

}  // namespace tile_cuda
}  // namespace
}  // namespace roformer::ops
