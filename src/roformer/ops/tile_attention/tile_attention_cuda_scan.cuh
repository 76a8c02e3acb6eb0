// The parts of CUDA tile attention that scan a row from its diagonal back (the kernel walks the
// key tiles from the last down for them, tile_attention_cuda_kernels.cuh): CoPE's term, whose
// count at key j sums the gates of keys j to i, and stick-breaking's weights, each of which is
// what the sticks of the keys after it leave. Both are suffix sums along a row, which in the
// tensor-core fragment layout spans the four lanes of a row group; the rows of the tiles already
// visited are carried per thread. Unnamed namespace, as tile_attention_cuda_blocks.cuh.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "roformer/ops/tile_attention/tile_attention_cuda_blocks.cuh"

namespace roformer::ops {
namespace {  // NOLINT(build/namespaces): per including file, see tile_attention_cuda_blocks.cuh

namespace tile_cuda {

constexpr double kLn2 = 0.6931471805599453, kLog2e = 1.4426950408889634;

__device__ __forceinline__ float exp_of(float x) {
  return expf(x);
}
__device__ __forceinline__ double exp_of(double x) {
  return exp(x);
}
// log(1 + e^z) without overflow.
__device__ __forceinline__ float softplus_of(float z) {
  return fmaxf(z, 0.0f) + log1pf(expf(-fabsf(z)));
}
__device__ __forceinline__ double softplus_of(double z) {
  return fmax(z, 0.0) + log1p(exp(-fabs(z)));
}

// The value of lane t ^ m of the thread's row group (m = 0: the thread's own), from the thread's
// own and its three shuffles.
template <typename A>
__device__ __forceinline__ A lane_value(int m, A own, A x1, A x2, A x3) {
  return m == 0 ? own : m == 1 ? x1 : m == 2 ? x2 : x3;
}

// Suffix sums along one of the thread's two rows of the warp's tile, in the fragment layout (x[n][e]:
// column 8n + 2t + e): x(c) becomes carry + the sum of x(c') over columns c' > c (kInclusive:
// c' >= c), and carry gains the row's total. The four lanes of a row group add the total in one
// order, so their carries agree to the bit. One row at a time keeps the kernel's registers.
template <bool kInclusive, typename A, int N>
__device__ __forceinline__ void row_suffix_sums(const Place& at, A (&x)[N][2], A& carry) {
#pragma unroll
  for (int n = N - 1; n >= 0; --n) {
    const A high = x[n][1], pair = x[n][0] + high;
    const A x1 = __shfl_xor_sync(0xffffffffu, pair, 1), x2 = __shfl_xor_sync(0xffffffffu, pair, 2),
            x3 = __shfl_xor_sync(0xffffffffu, pair, 3);
    A after = 0;  // the pairs of the group's later lanes
#pragma unroll
    for (int later = 3; later > 0; --later)
      if (later > at.t) after += lane_value(at.t ^ later, pair, x1, x2, x3);
    const A all = ((lane_value(at.t, pair, x1, x2, x3) + lane_value(at.t ^ 1, pair, x1, x2, x3)) +
                   lane_value(at.t ^ 2, pair, x1, x2, x3)) +
                  lane_value(at.t ^ 3, pair, x1, x2, x3);
    const A base = carry + after;
    x[n][1] = kInclusive ? base + high : base;
    x[n][0] = kInclusive ? base + pair : base + high;
    carry += all;
  }
}

// CoPE's term added to the warp's scores of the tile (log2 units, -inf where hidden), the tiles
// visited from the diagonal back: each visible key's gate sigmoid(z), its count (the gates of the
// keys from it to the diagonal: this tile's suffix sums plus `counted`, those of the tiles after
// it, which gains this tile's) and the row's table interpolated there, clamped to [0, P - 1].
template <typename acc_t, int N>
__device__ __forceinline__ void add_cope_term(const TileCudaLaunch& p, const Place& at, acc_t (&s)[N][4],
                                              acc_t (&counted)[2]) {
  constexpr acc_t kNegInf = -std::numeric_limits<acc_t>::infinity();
  const acc_t top = static_cast<acc_t>(p.cope.positions - 1);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    acc_t count[N][2];
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const acc_t z = s[n][2 * r + e];
        count[n][e] = z == kNegInf ? acc_t(0) : acc_t(1) / (acc_t(1) + exp_of(-z * acc_t(kLn2)));
      }
    row_suffix_sums<true>(at, count, counted[r]);
    const int64_t i = at.row(r) < p.seq ? at.row(r) : 0;  // a row past S has no visible key
    const acc_t* table =
        static_cast<const acc_t*>(p.cope.at_integers) + ((at.b * p.heads + at.h) * p.seq + i) * p.cope.positions;
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        acc_t& z = s[n][2 * r + e];
        if (z == kNegInf) continue;
        const acc_t c = count[n][e] > acc_t(0) ? (count[n][e] < top ? count[n][e] : top) : acc_t(0);
        const int64_t low = static_cast<int64_t>(c);  // c >= 0: the floor
        const acc_t w = c - static_cast<acc_t>(low);
        const acc_t term = w > acc_t(0) ? table[low + 1] * w + table[low] * (acc_t(1) - w) : table[low];
        z += term * acc_t(kLog2e);
      }
  }
}

// Stick-breaking's weights of the warp's tile in place of its scores (log2 units, -inf where
// hidden), the tiles visited from the diagonal back: a key j < i takes sigmoid(z) of what the
// sticks of the keys after it leave, exp(log sigmoid(z) + left + the tile's log sigmoid(-z) of
// the keys after j); `left` (per row, natural log) gains the tile's sum, and `sum` each weight.
template <typename acc_t, int N>
__device__ __forceinline__ void stick_weights(const Place& at, int64_t j0, acc_t (&s)[N][4], acc_t (&left)[2],
                                              acc_t (&sum)[2]) {
  constexpr acc_t kNegInf = -std::numeric_limits<acc_t>::infinity();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    acc_t kept[N][2];  // log sigmoid(-z) = -softplus(z) of each visible key, 0 elsewhere
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        acc_t& score = s[n][2 * r + e];
        const bool live = score != kNegInf && j0 + 8 * n + 2 * at.t + e < at.row(r);
        const acc_t z = score * acc_t(kLn2), softplus = live ? softplus_of(z) : acc_t(0);
        kept[n][e] = -softplus;
        score = live ? z - softplus : kNegInf;  // log sigmoid(z)
      }
    row_suffix_sums<false>(at, kept, left[r]);
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        acc_t& score = s[n][2 * r + e];
        score = score == kNegInf ? acc_t(0) : exp_of(score + kept[n][e]);
        sum[r] += score;
      }
  }
}

}  // namespace tile_cuda
}  // namespace
}  // namespace roformer::ops
