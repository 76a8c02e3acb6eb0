// The fused RoPE op's CUDA kernels and their launch plan, for nvcc (rope_cuda.cu) and for a
// host compiler (the host-emulation tests, through cuda_elem.cuh). One launch rotates every
// tensor (q, k and optionally v). Contiguous, 16-byte aligned features take the vector kernel
// (a thread per (token, 16-byte slot, group of heads), (cos, sin) in registers, many 16-byte
// loads in flight); anything else the strided kernel (a block per token, (cos, sin) in shared
// memory). (cos, sin) come from the caller's table when the launch has one (an L2-resident read
// instead of a sincos per pair), else they are computed. The per-pair math comes from
// rope_math.h, the same code the CPU kernel runs. The kernels live in an unnamed namespace: each
// including file gets its own copies, so the host build of a test never meets nvcc's launch
// stubs of the same names in roformer_core. No LibTorch headers here.
#pragma once

#include <algorithm>
#include <cstdint>

#include "roformer/ops/common/cuda_elem.cuh"
#include "roformer/ops/rope/rope_math.h"

namespace roformer::ops {
namespace {  // NOLINT(build/namespaces): per including file, see above

using cuda_elem::Acc;
using cuda_elem::from_acc;
using cuda_elem::to_acc;

template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Vec {
  T v[VEC];
};

// ---- the general kernel: any strides --------------------------------------------------------
// One block per token; (cos, sin) of each pair computed once into shared memory and reused by
// every head of every tensor; one pair (or one tail element) per work item.
template <typename T>
__global__ void rope_strided_kernel(const RopeLaunch p) {
  using acc_t = typename Acc<T>::type;
  acc_t* cos_s = reinterpret_cast<acc_t*>(cuda_elem::dynamic_shared_memory());  // [half]
  const int64_t half = p.rotary_dim / 2;
  acc_t* sin_s = cos_s + half;  // [half], sign folded in

  const int64_t tok = blockIdx.x;
  const int64_t b = tok / p.seq, s = tok % p.seq;
  const int64_t pos = rope_position(p, b, s);
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    acc_t c, sn;
    rope_pair_sincos(p, pos, i, &c, &sn);
    cos_s[i] = c;
    sin_s[i] = sn * static_cast<acc_t>(p.sign);
  }
  __syncthreads();

  const int64_t tail = p.inplace ? 0 : p.head_dim - p.rotary_dim;
  const int64_t per_head = half + tail;
  for (int j = 0; j < p.num_tensors; ++j) {
    const RopeTensorArgs& t = p.tensors[j];
    const acc_t mag = static_cast<acc_t>(t.magnitude);
    const T* in = static_cast<const T*>(t.in) + b * t.in_stride[0] + s * t.in_stride[1];
    T* out = static_cast<T*>(t.out) + b * t.out_stride[0] + s * t.out_stride[1];
    for (int64_t w = threadIdx.x; w < t.heads * per_head; w += blockDim.x) {
      const int64_t h = w / per_head, r = w % per_head;
      const T* hin = in + h * t.in_stride[2];
      T* hout = out + h * t.out_stride[2];
      if (r >= half) {  // pass-through tail element
        const int64_t d = p.rotary_dim + (r - half);
        hout[d * t.out_stride[3]] = hin[d * t.in_stride[3]];
        continue;
      }
      const int64_t d0 = rope_first(p, r), d1 = rope_second(p, r);
      acc_t y0, y1;
      rope_rotate_pair(to_acc(hin[d0 * t.in_stride[3]]), to_acc(hin[d1 * t.in_stride[3]]), cos_s[r] * mag,
                       sin_s[r] * mag, &y0, &y1);
      hout[d0 * t.out_stride[3]] = from_acc<T>(y0);
      hout[d1 * t.out_stride[3]] = from_acc<T>(y1);
    }
  }
}

// ---- the vector kernel: contiguous features, 16-byte vectors ------------------------------
// The heads of all tensors form one list of rows (q's heads, then k's, then v's). A thread owns
// one 16-byte slot of one token (interleaved: VEC/2 pairs in one vector; half pairing: VEC
// pairs, one vector from each half) in rows_per_thread() rows spaced `groups` apart. It issues
// all of its loads first, then computes its pairs' (cos, sin) in registers while they are in
// flight (no shared memory, no barrier), then rotates and stores. Rows per thread: eight for
// interleaved 2-byte types, else four (more spill registers), so that one (cos, sin) serves
// 16-32 bytes: at 8 bytes (two rows) the bf16 kernel was bound by the sincos arithmetic
// (measurements: docs/kernels.md). Slots past the rotary span copy the pass-through tail. Adjacent
// threads take adjacent slots, then adjacent rows: warps read whole lines. 32-bit index math.
// (cos, sin) of pairs first..first+N-1 at pos: 16-byte loads from the launch's table when it
// covers pos (vector_table_ok() checked the alignment), else computed; double always computes.
template <int N>
__device__ __forceinline__ void slot_sincos(const RopeLaunch& p, int64_t pos, int64_t first, float* c, float* s) {
  if (p.cos_sin != nullptr && pos >= 0 && pos < p.cos_sin_rows) {
    constexpr int W = N < 4 ? N : 4;  // floats per load
    using L = Vec<float, W>;
    const float* row = p.cos_sin + pos * p.rotary_dim + first;
#pragma unroll
    for (int k = 0; k < N / W; ++k) {
      const L cv = *reinterpret_cast<const L*>(row + k * W);
      const L sv = *reinterpret_cast<const L*>(row + p.rotary_dim / 2 + k * W);
#pragma unroll
      for (int e = 0; e < W; ++e) c[k * W + e] = cv.v[e], s[k * W + e] = sv.v[e];
    }
    return;
  }
#pragma unroll
  for (int e = 0; e < N; ++e) rope_sincos(rope_angle(pos, p.position_scale, p.inv_freq[first + e]), &c[e], &s[e]);
}
template <int N>
__device__ __forceinline__ void slot_sincos(const RopeLaunch& p, int64_t pos, int64_t first, double* c, double* s) {
#pragma unroll
  for (int e = 0; e < N; ++e) rope_sincos(rope_angle(pos, p.position_scale, p.inv_freq[first + e]), &c[e], &s[e]);
}

template <typename T, bool INTERLEAVED>
constexpr int rows_per_thread() {
  return sizeof(T) == 2 && INTERLEAVED ? 8 : 4;
}

struct VecGrid {
  uint32_t slots, rot_slots, groups, rows, total;
  uint32_t row_start[3];  // first row of each tensor
};

constexpr int kVectorThreads = 256;

// ROWS and MIN_BLOCKS (blocks per SM the register budget must allow) default to the tuned
// values; tests/benchmarks/rope_kernel_variants.cu times other choices.
template <typename T, int VEC, bool INTERLEAVED, int ROWS = rows_per_thread<T, INTERLEAVED>(), int MIN_BLOCKS = 2>
__global__ void __launch_bounds__(kVectorThreads, MIN_BLOCKS) rope_vector_kernel(const RopeLaunch p, const VecGrid g) {
  using acc_t = typename Acc<T>::type;
  using V = Vec<T, VEC>;
  constexpr int kPairs = INTERLEAVED ? VEC / 2 : VEC;  // pairs owned by one slot
  constexpr int kVecs = INTERLEAVED ? 1 : 2;           // vectors per row per slot
  constexpr int kRows = ROWS;
  const uint32_t gid = blockIdx.x * blockDim.x + threadIdx.x;
  if (gid >= g.total) return;
  const uint32_t slot = gid % g.slots, rest = gid / g.slots;
  const uint32_t group = rest % g.groups, tok = rest / g.groups;
  const uint32_t b = tok / static_cast<uint32_t>(p.seq), s = tok % static_cast<uint32_t>(p.seq);
  const bool rotary = slot < g.rot_slots;
  const int nv = rotary ? kVecs : 1;  // a tail slot copies one vector
  int64_t off[kVecs];                 // element offsets of this slot's vectors inside a head
  off[0] = rotary ? static_cast<int64_t>(slot) * VEC : p.rotary_dim + static_cast<int64_t>(slot - g.rot_slots) * VEC;
  if constexpr (kVecs == 2) off[1] = p.rotary_dim / 2 + static_cast<int64_t>(slot) * VEC;

  // Row u of this thread: its tensor and head (rows past the end: none).
  auto locate = [&](int u, int* j, int64_t* h) {
    const uint32_t row = group + u * g.groups;
    if (row >= g.rows) return false;
    const bool v = row >= g.row_start[2], k = row >= g.row_start[1];
    *j = v ? 2 : (k ? 1 : 0);
    *h = row - (v ? g.row_start[2] : (k ? g.row_start[1] : 0));
    return true;
  };
  V x[kRows][kVecs];
#pragma unroll
  for (int u = 0; u < kRows; ++u) {
    int j;
    int64_t h;
    if (!locate(u, &j, &h)) continue;
    const RopeTensorArgs& t = p.tensors[j];
    const T* src = static_cast<const T*>(t.in) + b * t.in_stride[0] + s * t.in_stride[1] + h * t.in_stride[2];
#pragma unroll
    for (int v = 0; v < kVecs; ++v)
      if (v < nv) x[u][v] = *reinterpret_cast<const V*>(src + off[v]);
  }
  acc_t c[kPairs], sn[kPairs];
  if (rotary) {
    const int64_t first_pair = INTERLEAVED ? static_cast<int64_t>(slot) * (VEC / 2) : static_cast<int64_t>(slot) * VEC;
    slot_sincos<kPairs>(p, rope_position(p, b, s), first_pair, c, sn);
#pragma unroll
    for (int e = 0; e < kPairs; ++e) sn[e] *= static_cast<acc_t>(p.sign);
  }
#pragma unroll
  for (int u = 0; u < kRows; ++u) {
    int j;
    int64_t h;
    if (!locate(u, &j, &h)) continue;
    const RopeTensorArgs& t = p.tensors[j];
    T* dst = static_cast<T*>(t.out) + b * t.out_stride[0] + s * t.out_stride[1] + h * t.out_stride[2];
    if (!rotary) {  // pass-through tail vector
      *reinterpret_cast<V*>(dst + off[0]) = x[u][0];
      continue;
    }
    const acc_t mag = static_cast<acc_t>(t.magnitude);
    V y[kVecs];
#pragma unroll
    for (int e = 0; e < kPairs; ++e) {
      // interleaved: elements (2e, 2e+1) of the one vector; half: element e of each vector
      const int v1 = INTERLEAVED ? 0 : 1;
      const int i0 = INTERLEAVED ? 2 * e : e, i1 = INTERLEAVED ? 2 * e + 1 : e;
      acc_t y0, y1;
      rope_rotate_pair(to_acc(x[u][0].v[i0]), to_acc(x[u][v1].v[i1]), c[e] * mag, sn[e] * mag, &y0, &y1);
      y[0].v[i0] = from_acc<T>(y0);
      y[v1].v[i1] = from_acc<T>(y1);
    }
#pragma unroll
    for (int v = 0; v < kVecs; ++v) *reinterpret_cast<V*>(dst + off[v]) = y[v];
  }
}

// The vector kernel applies when features are contiguous, every base pointer and stride keeps
// 16-byte alignment, and the rotary span and the copied tail split into whole vectors.
template <typename T, int VEC>
bool vectorizable(const RopeLaunch& p) {
  const int64_t half = p.rotary_dim / 2;
  if (p.interleaved ? (p.rotary_dim % VEC != 0) : (half % VEC != 0)) return false;
  if (!p.inplace && (p.head_dim - p.rotary_dim) % VEC != 0) return false;
  for (int j = 0; j < p.num_tensors; ++j) {
    const RopeTensorArgs& t = p.tensors[j];
    if (t.in_stride[3] != 1 || t.out_stride[3] != 1) return false;
    if (reinterpret_cast<uintptr_t>(t.in) % 16 != 0 || reinterpret_cast<uintptr_t>(t.out) % 16 != 0) return false;
    for (int k = 0; k < 3; ++k)
      if (t.in_stride[k] % VEC != 0 || t.out_stride[k] % VEC != 0) return false;
  }
  return true;
}

// Fills the vector grid; false when the thread count does not fit 32-bit index math.
template <int VEC, bool INTERLEAVED>
bool vector_grid(const RopeLaunch& p, int rows_per_thread, VecGrid* g) {
  const int64_t rot_slots = INTERLEAVED ? p.rotary_dim / VEC : p.rotary_dim / 2 / VEC;
  const int64_t slots = rot_slots + (p.inplace ? 0 : (p.head_dim - p.rotary_dim) / VEC);
  int64_t rows = 0;
  for (int j = 0; j < 3; ++j) {
    g->row_start[j] = static_cast<uint32_t>(rows);
    if (j < p.num_tensors) rows += p.tensors[j].heads;
  }
  if (p.num_tensors < 3) g->row_start[2] = static_cast<uint32_t>(rows);
  if (p.num_tensors < 2) g->row_start[1] = static_cast<uint32_t>(rows);
  const int64_t groups = (rows + rows_per_thread - 1) / rows_per_thread;
  const int64_t total = p.batch * p.seq * groups * slots;
  if (total >= (int64_t{1} << 31)) return false;
  g->rot_slots = static_cast<uint32_t>(rot_slots);
  g->slots = static_cast<uint32_t>(slots);
  g->rows = static_cast<uint32_t>(rows);
  g->groups = static_cast<uint32_t>(groups);
  g->total = static_cast<uint32_t>(total);
  return true;
}

// The vector kernel reads a slot's (cos, sin) with loads of up to 16 bytes: the table must be
// 16-byte aligned and each half row a whole number of them.
template <int VEC, bool INTERLEAVED>
bool vector_table_ok(const RopeLaunch& p) {
  constexpr int kPairs = INTERLEAVED ? VEC / 2 : VEC, W = kPairs < 4 ? kPairs : 4;
  return reinterpret_cast<uintptr_t>(p.cos_sin) % 16 == 0 && (p.rotary_dim / 2) % W == 0;
}

// Launches the vector kernel through `launcher` (cuda_elem::StreamLauncher on a GPU); false
// when the thread count does not fit its 32-bit index math.
template <typename T, int VEC, bool INTERLEAVED, int ROWS = rows_per_thread<T, INTERLEAVED>(), int MIN_BLOCKS = 2,
          typename Launcher>
bool launch_vector(const RopeLaunch& launch, const Launcher& launcher) {
  VecGrid g;
  if (!vector_grid<VEC, INTERLEAVED>(launch, ROWS, &g)) return false;
  RopeLaunch p = launch;
  if (p.cos_sin != nullptr && !vector_table_ok<VEC, INTERLEAVED>(p)) p.cos_sin = nullptr;  // compute instead
  launcher(rope_vector_kernel<T, VEC, INTERLEAVED, ROWS, MIN_BLOCKS>, (g.total + kVectorThreads - 1) / kVectorThreads,
           kVectorThreads, 0, p, g);
  return true;
}

// Whether a launch of storage type T takes the vector kernel (else the strided one).
template <typename T>
bool rope_takes_vector_kernel(const RopeLaunch& p) {
  constexpr int VEC = static_cast<int>(16 / sizeof(T));
  VecGrid g;
  return vectorizable<T, VEC>(p) && (p.interleaved ? vector_grid<VEC, true>(p, rows_per_thread<T, true>(), &g)
                                                   : vector_grid<VEC, false>(p, rows_per_thread<T, false>(), &g));
}

template <typename T, typename Launcher>
void rope_launch_typed(const RopeLaunch& p, const Launcher& launcher) {
  constexpr int VEC = static_cast<int>(16 / sizeof(T));
  if (p.batch * p.seq == 0) return;
  const bool vector_done = vectorizable<T, VEC>(p) && (p.interleaved ? launch_vector<T, VEC, true>(p, launcher)
                                                                     : launch_vector<T, VEC, false>(p, launcher));
  if (!vector_done) {
    const size_t smem = sizeof(typename Acc<T>::type) * static_cast<size_t>(p.rotary_dim);
    launcher(rope_strided_kernel<T>, static_cast<unsigned>(p.batch * p.seq), 128, smem, p);
  }
}

// The whole launch plan: the storage type's kernel, vector or strided, through `launcher`.
template <typename Launcher>
void rope_launch(const RopeLaunch& p, const Launcher& launcher) {
  cuda_elem::with_storage_type(p.dtype, [&](auto tag) { rope_launch_typed<decltype(tag)>(p, launcher); });
}

}  // namespace
}  // namespace roformer::ops
