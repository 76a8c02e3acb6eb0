// CUDA tile attention's kernel and launch plan, for nvcc (tile_attention_cuda.cu) and a host
// compiler (the host-emulation tests, through cuda_elem.cuh). A block of four warps takes 64
// query rows of one (batch, head) and visits the key tiles it can see. Per tile the block stages
// keys and values in shared memory; each warp forms its 16 rows' scores, scales them, adds the
// family's term per score and masks (tile_attention_cuda_blocks.cuh), turns them into weights
// (FlashAttention-2's online softmax, each row's running maximum and sum in log2 units; or
// stick-breaking's sticks) and adds their product with the values. CoPE and stick-breaking scan
// each row from its diagonal back (tile_attention_cuda_scan.cuh), so their kernel visits the
// tiles from the last down; a relative table adds a product per warp and tile
// (tile_attention_cuda_relative.cuh). Unnamed namespace, as tile_attention_cuda_blocks.cuh.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "roformer/ops/tile_attention/tile_attention_cuda_blocks.cuh"
#include "roformer/ops/tile_attention/tile_attention_cuda_relative.cuh"
#include "roformer/ops/tile_attention/tile_attention_cuda_scan.cuh"

namespace roformer::ops {
namespace {  // NOLINT(build/namespaces): per including file, see tile_attention_cuda_blocks.cuh

namespace tile_cuda {

// Which kernel: the plain one; RoPE's remaps (two rotations or chunks); the scan from the
// diagonal back (CoPE, stick-breaking); or a relative table's products. Each a kernel of its own,
// so the plain one keeps its registers.
enum class Walk { plain, rotations, scan, relative };

// Whether the launch needs the scan's walk.
inline bool scans(const TileCudaLaunch& p) {
  return p.term == TileCudaTerm::cope || p.weights != TileCudaWeights::softmax;
}

// The online softmax of the warp's tile (scores in log2 units, -inf where hidden): each row's
// maximum grows, its sum and the outputs so far are rescaled, and the scores become exp2(s - max).
template <typename acc_t, int N, int D>
__device__ __forceinline__ void softmax_step(acc_t (&s)[N][4], acc_t (&top)[2], acc_t (&sum)[2], acc_t (&o)[D / 8][4]) {
  constexpr acc_t kNegInf = -std::numeric_limits<acc_t>::infinity();
  acc_t tile_top[2] = {kNegInf, kNegInf};
#pragma unroll
  for (int n = 0; n < N; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) tile_top[e >> 1] = s[n][e] > tile_top[e >> 1] ? s[n][e] : tile_top[e >> 1];
  acc_t base[2], rescale[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const acc_t grown = group_max(tile_top[r]);
    const acc_t next = grown > top[r] ? grown : top[r];
    base[r] = next == kNegInf ? acc_t(0) : next;  // a row with nothing visible yet stays at zero
    rescale[r] = exp2_of(top[r] - base[r]);
    top[r] = next;
    sum[r] *= rescale[r];
  }
#pragma unroll
  for (int n = 0; n < N; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[n][e] = exp2_of(s[n][e] - base[e >> 1]);
      sum[e >> 1] += s[n][e];
    }
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[n][e] *= rescale[e >> 1];
}

// The warp's rows out: softmax divides by each row's sum (and writes its log-sum-exp if asked);
// stick-breaking keeps the weighted values, with what the sticks leave on the query's own value
// if asked.
template <typename T, int D>
__device__ __forceinline__ void write_rows(const TileCudaLaunch& p, const Place& at,
                                           const typename Acc<T>::type (&top)[2], const typename Acc<T>::type (&sum)[2],
                                           const typename Acc<T>::type (&o)[D / 8][4]) {
  using acc_t = typename Acc<T>::type;
  T* out = static_cast<T*>(p.out) + at.b * p.out_stride[0] + at.h * p.out_stride[1];
  const bool softmax = p.weights == TileCudaWeights::softmax;
  const bool remainder = p.weights == TileCudaWeights::stick_breaking_remainder_to_query;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const acc_t total = group_sum(sum[r]);
    const int64_t i = at.row(r);
    if (i >= p.seq) continue;
    const acc_t inverse = softmax ? acc_t(1) / total : acc_t(1), left = remainder ? acc_t(1) - total : acc_t(0);
    const T* own = static_cast<const T*>(p.v) + at.b * p.v_stride[0] + at.h * p.v_stride[1] + i * p.v_stride[2];
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int d = 8 * n + 2 * at.t + e;
        const acc_t value = o[n][2 * r + e] * inverse;
        out[i * p.out_stride[2] + d] = from_acc<T>(remainder ? value + left * to_acc(own[d]) : value);
      }
    if (softmax && p.lse && at.t == 0)
      static_cast<acc_t*>(p.lse)[(at.b * p.heads + at.h) * p.seq + i] =
          (top[r] + log2(static_cast<double>(total))) * acc_t(0.6931471805599453);  // ln 2
  }
}

template <typename T, int D, Walk kWalk>
__global__ void __launch_bounds__(kThreads) tile_attention_kernel(const TileCudaLaunch p) {
  using acc_t = typename Acc<T>::type;
  constexpr acc_t kNegInf = -std::numeric_limits<acc_t>::infinity();
  constexpr int N = kKeys<T> / 8;
  unsigned char* smem = cuda_elem::dynamic_shared_memory();
  const Place at = place_of(p);
  uint32_t qa[kTensorCores<T> ? D / 16 : 1][4];
  uint32_t ra[kTensorCores<T> && kWalk == Walk::relative ? D / 16 : 1][4];  // the relative term's queries
  if constexpr (kTensorCores<T>)
    load_query_fragments<T, D>(p, at, rows_of<T>(p.q, p.q_stride[0], p.q_stride[1], p.q_stride[2], at), qa);
  if constexpr (kTensorCores<T> && kWalk == Walk::relative)
    load_query_fragments<T, D>(
        p, at, rows_of<T>(p.relative.q, p.relative.q_stride[0], p.relative.q_stride[1], p.relative.q_stride[2], at),
        ra);
  acc_t o[D / 8][4], top[2] = {kNegInf, kNegInf}, sum[2] = {0, 0};
  acc_t counted[2] = {0, 0}, left[2] = {0, 0};  // the scan, per row: CoPE's gates; log of what the sticks leave
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[n][e] = 0;
  const int64_t key_tiles = (at.key_end + kKeys<T> - 1) / kKeys<T>;
  for (int64_t tile = 0; tile < key_tiles; ++tile) {
    const int64_t j0 = (kWalk == Walk::scan ? key_tiles - 1 - tile : tile) * kKeys<T>;
    stage_tile<T, D>(p, at, j0, rows_of<T>(p.k, p.k_stride[0], p.k_stride[1], p.k_stride[2], at), true, smem);
    __syncthreads();
    acc_t s[N][4];
    if constexpr (kWalk == Walk::rotations) {
      rotated_scores<T, D>(p, at, j0, qa, smem, s);
    } else {
      tile_scores<T, D>(p, at, qa, rows_of<T>(p.q, p.q_stride[0], p.q_stride[1], p.q_stride[2], at), smem, s);
    }
    if constexpr (kWalk == Walk::relative) add_relative_scores<T, D>(p, at, j0, ra, smem, s);
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s[n][e] = scored<acc_t>(p, at, at.row(e >> 1), j0 + 8 * n + 2 * at.t + (e & 1), s[n][e]);
    if constexpr (kWalk == Walk::scan) {
      if (p.term == TileCudaTerm::cope) add_cope_term<acc_t, N>(p, at, s, counted);
      if (p.weights != TileCudaWeights::softmax) {
        stick_weights<acc_t, N>(at, j0, s, left, sum);
      } else {
        softmax_step<acc_t, N, D>(s, top, sum, o);
      }
    } else {
      softmax_step<acc_t, N, D>(s, top, sum, o);
    }
    add_weighted_values<T, D>(at, smem, s, o);
    if constexpr (kWalk == Walk::relative)
      if (p.relative.value) add_relative_values<T, D>(p, at, j0, smem, s, o);
    __syncthreads();  // the tile read by every warp before the next is staged
  }
  write_rows<T, D>(p, at, top, sum, o);
}

template <typename T, int D, typename Launcher>
void launch_with(const TileCudaLaunch& p, const Launcher& launch) {
  const int64_t tiles = (p.seq + kTileCudaRows - 1) / kTileCudaRows;
  const unsigned grid = static_cast<unsigned>(p.batch * p.heads * tiles);
  const size_t bytes = SharedLayout<T, D>::bytes;
  if (p.term == TileCudaTerm::relative) {
    if (scans(p) || p.far_q)
      throw std::invalid_argument("tile attention on CUDA: a relative table takes softmax and no rotations");
    return launch(tile_attention_kernel<T, D, Walk::relative>, grid, kThreads, SharedLayout<T, D>::relative_bytes, p);
  }
  if (scans(p)) {
    if (p.far_q) throw std::invalid_argument("tile attention on CUDA: CoPE and stick-breaking take no rotations");
    if (!p.causal) throw std::invalid_argument("tile attention on CUDA: CoPE and stick-breaking are causal");
    return launch(tile_attention_kernel<T, D, Walk::scan>, grid, kThreads, bytes, p);
  }
  if (p.far_q) return launch(tile_attention_kernel<T, D, Walk::rotations>, grid, kThreads, bytes, p);
  launch(tile_attention_kernel<T, D, Walk::plain>, grid, kThreads, bytes, p);
}

}  // namespace tile_cuda

// The launch plan: the kernel of the launch's dtype and head dimension. nvcc builds the kernels a
// GPU runs, bf16 and float32 at head dimensions 64 and 128 (tile_cuda_builds; each more costs
// about 13 s of one core for the eight architectures); a host compiler builds every dtype and
// head dimension 32 too, for the tests' precision check of the shared code.
template <typename Launcher>
void tile_attention_launch(const TileCudaLaunch& p, const Launcher& launch) {
  cuda_elem::with_storage_type(p.dtype, [&](auto tag) {
    using T = decltype(tag);
#if defined(__CUDACC__)
    constexpr bool kBuilt = std::is_same<T, __nv_bfloat16>::value || std::is_same<T, float>::value;
#else
    constexpr bool kBuilt = true;
#endif
    if constexpr (!kBuilt) {
      throw std::invalid_argument("tile attention on CUDA: no kernel for this dtype");
    } else {
      if (p.head_dim == 64) return tile_cuda::launch_with<T, 64>(p, launch);
      if (p.head_dim == 128) return tile_cuda::launch_with<T, 128>(p, launch);
#if defined(__CUDACC__)
      throw std::invalid_argument("tile attention on CUDA: no kernel for this head dimension");
#else
      return tile_cuda::launch_with<T, 32>(p, launch);
#endif
    }
  });
}

}  // namespace
}  // namespace roformer::ops
