// The fused residual add + LayerNorm op's CUDA kernels and their launch plan, for nvcc
// (add_layer_norm_cuda.cu) and for a host compiler (the host-emulation tests, through
// cuda_elem.cuh): one warp per row, lanes strided across the columns (coalesced loads and
// stores). Rows of up to 32 K columns keep v = x + residual in registers (K = 8 or 32 values a
// lane), so x and residual are read from memory once per pass; wider rows read them again from
// L1/L2 in each of the three sweeps. Row sums are butterfly shuffles, so every lane gets the
// same bits. The backward gives each warp a fixed run of rows (add_layer_norm_cuda_rows_per_block)
// and writes its dL/dw and dL/db partial row; the blocks are summed by add_layer_norm.cpp.
// Formulas: add_layer_norm_math.h. The kernels live in an unnamed namespace: each including
// file gets its own copies (see rope_cuda_kernels.cuh).
#pragma once

#include <algorithm>
#include <cstdint>

#include "roformer/ops/add_layer_norm/add_layer_norm_kernels.h"
#include "roformer/ops/common/cuda_elem.cuh"

namespace roformer::ops {
namespace {  // NOLINT(build/namespaces): per including file

using cuda_elem::Acc;
using cuda_elem::from_acc;
using cuda_elem::to_acc;

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 4;
constexpr int64_t kMaxBackwardWarps = 1024;  // partial rows of the weight and bias gradients

// Rows of each backward warp for a row count (add_layer_norm_cuda_rows_per_block).
inline int64_t add_layer_norm_backward_rows_per_warp(int64_t rows) {
  return std::max<int64_t>(1, (rows + kMaxBackwardWarps - 1) / kMaxBackwardWarps);
}

template <typename acc_t>
__device__ __forceinline__ acc_t warp_sum(acc_t v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ int64_t global_warp() {
  return static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
}

// Reads v = x + residual at column j of row r (accumulation type).
template <typename T>
__device__ __forceinline__ typename Acc<T>::type load_sum(const AddLayerNormLaunch& p, int64_t r, int64_t j) {
  const int64_t i = r * p.cols + j;
  return to_acc(static_cast<const T*>(p.x)[i]) + to_acc(static_cast<const T*>(p.residual)[i]);
}

// Mean and rstd of row r; K > 0 keeps the lane's values in v[], K == 0 reads them again.
template <typename T, int K>
__device__ __forceinline__ void row_moments(const AddLayerNormLaunch& p, int64_t r, int lane, typename Acc<T>::type* v,
                                            typename Acc<T>::type* mean, typename Acc<T>::type* rstd) {
  using acc_t = typename Acc<T>::type;
  acc_t sum = 0, sq = 0;
  if constexpr (K > 0) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int64_t j = lane + k * kWarp;
      v[k] = j < p.cols ? load_sum<T>(p, r, j) : acc_t(0);
      sum += v[k];
    }
    *mean = warp_sum(sum) / static_cast<acc_t>(p.cols);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const acc_t d = v[k] - *mean;
      if (lane + k * kWarp < p.cols) sq += d * d;
    }
  } else {
    for (int64_t j = lane; j < p.cols; j += kWarp) sum += load_sum<T>(p, r, j);
    *mean = warp_sum(sum) / static_cast<acc_t>(p.cols);
    for (int64_t j = lane; j < p.cols; j += kWarp) {
      const acc_t d = load_sum<T>(p, r, j) - *mean;
      sq += d * d;
    }
  }
  *rstd = ln_rstd(warp_sum(sq), p.cols, p.eps);
}

template <typename T, int K>
__global__ void add_layer_norm_forward_kernel(const AddLayerNormLaunch p) {
  using acc_t = typename Acc<T>::type;
  const int lane = threadIdx.x % kWarp;
  const auto* w = static_cast<const acc_t*>(p.weight);
  const auto* b = static_cast<const acc_t*>(p.bias);
  T* out = static_cast<T*>(p.out);
  for (int64_t r = global_warp(); r < p.rows; r += static_cast<int64_t>(gridDim.x) * kWarpsPerBlock) {
    acc_t v[K > 0 ? K : 1], mean, rstd;
    row_moments<T, K>(p, r, lane, v, &mean, &rstd);
    if constexpr (K > 0) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int64_t j = lane + k * kWarp;
        if (j < p.cols) out[r * p.cols + j] = from_acc<T>(ln_affine(ln_xhat(v[k], mean, rstd), w[j], b[j]));
      }
    } else {
      for (int64_t j = lane; j < p.cols; j += kWarp)
        out[r * p.cols + j] = from_acc<T>(ln_affine(ln_xhat(load_sum<T>(p, r, j), mean, rstd), w[j], b[j]));
    }
    if (lane == 0) {
      static_cast<acc_t*>(p.mean)[r] = mean;
      static_cast<acc_t*>(p.rstd)[r] = rstd;
    }
  }
}

// dL/dv of row r into p.grad_in; g xhat and g added to the lane's wsum[] and bsum[] (K > 0) or
// straight into the warp's partial rows (K == 0: this lane owns those columns of them).
template <typename T, int K>
__device__ __forceinline__ void backward_row(const AddLayerNormLaunch& p, int64_t r, int lane,
                                             typename Acc<T>::type* wsum, typename Acc<T>::type* bsum,
                                             typename Acc<T>::type* wrow, typename Acc<T>::type* brow) {
  using acc_t = typename Acc<T>::type;
  const auto* w = static_cast<const acc_t*>(p.weight);
  const T* g = static_cast<const T*>(p.grad) + r * p.cols;
  T* gin = static_cast<T*>(p.grad_in) + r * p.cols;
  const acc_t mean = static_cast<const acc_t*>(p.mean)[r], rstd = static_cast<const acc_t*>(p.rstd)[r];
  acc_t s_gw = 0, s_gw_xhat = 0;
  if constexpr (K > 0) {
    acc_t xhat[K], gw[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int64_t j = lane + k * kWarp;
      const bool in = j < p.cols;
      xhat[k] = in ? ln_xhat(load_sum<T>(p, r, j), mean, rstd) : acc_t(0);
      const acc_t gj = in ? to_acc(g[j]) : acc_t(0);
      gw[k] = in ? gj * w[j] : acc_t(0);
      wsum[k] += gj * xhat[k];
      bsum[k] += gj;
      s_gw += gw[k];
      s_gw_xhat += gw[k] * xhat[k];
    }
    const acc_t mean_gw = warp_sum(s_gw) / static_cast<acc_t>(p.cols);
    const acc_t mean_gw_xhat = warp_sum(s_gw_xhat) / static_cast<acc_t>(p.cols);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int64_t j = lane + k * kWarp;
      if (j < p.cols) gin[j] = from_acc<T>(ln_grad_in(gw[k], xhat[k], rstd, mean_gw, mean_gw_xhat));
    }
  } else {
    for (int64_t j = lane; j < p.cols; j += kWarp) {
      const acc_t xh = ln_xhat(load_sum<T>(p, r, j), mean, rstd), gj = to_acc(g[j]);
      s_gw += gj * w[j];
      s_gw_xhat += gj * w[j] * xh;
      wrow[j] += gj * xh;
      brow[j] += gj;
    }
    const acc_t mean_gw = warp_sum(s_gw) / static_cast<acc_t>(p.cols);
    const acc_t mean_gw_xhat = warp_sum(s_gw_xhat) / static_cast<acc_t>(p.cols);
    for (int64_t j = lane; j < p.cols; j += kWarp) {
      const acc_t xh = ln_xhat(load_sum<T>(p, r, j), mean, rstd), gj = to_acc(g[j]);
      gin[j] = from_acc<T>(ln_grad_in(gj * w[j], xh, rstd, mean_gw, mean_gw_xhat));
    }
  }
}

template <typename T, int K>
__global__ void add_layer_norm_backward_kernel(const AddLayerNormLaunch p) {
  using acc_t = typename Acc<T>::type;
  const int64_t warp = global_warp();
  if (warp >= add_layer_norm_blocks(p)) return;
  const int lane = threadIdx.x % kWarp;
  acc_t* wrow = static_cast<acc_t*>(p.weight_grad_partial) + warp * p.cols;
  acc_t* brow = static_cast<acc_t*>(p.bias_grad_partial) + warp * p.cols;
  acc_t wsum[K > 0 ? K : 1] = {}, bsum[K > 0 ? K : 1] = {};
  if constexpr (K == 0) {
    for (int64_t j = lane; j < p.cols; j += kWarp) wrow[j] = brow[j] = acc_t(0);
  }
  const int64_t r0 = warp * p.rows_per_block, r1 = r0 + p.rows_per_block < p.rows ? r0 + p.rows_per_block : p.rows;
  for (int64_t r = r0; r < r1; ++r) backward_row<T, K>(p, r, lane, wsum, bsum, wrow, brow);
  if constexpr (K > 0) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int64_t j = lane + k * kWarp;
      if (j < p.cols) {
        wrow[j] = wsum[k];
        brow[j] = bsum[k];
      }
    }
  }
}

// Launches the forward or backward kernel of storage type T with K values a lane through
// `launcher` (cuda_elem::StreamLauncher on a GPU).
template <typename T, int K, typename Launcher>
void add_layer_norm_launch_k(const AddLayerNormLaunch& p, const Launcher& launcher, bool backward) {
  const int64_t warps = backward ? add_layer_norm_blocks(p) : p.rows;
  const unsigned blocks =
      static_cast<unsigned>(std::min<int64_t>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock, 65535 * 8));
  if (backward)
    launcher(add_layer_norm_backward_kernel<T, K>, blocks, kWarpsPerBlock * kWarp, 0, p);
  else
    launcher(add_layer_norm_forward_kernel<T, K>, blocks, kWarpsPerBlock * kWarp, 0, p);
}

// Values a lane keeps in registers: 8 up to 256 columns, 32 up to 1024, none beyond.
template <typename T, typename Launcher>
void add_layer_norm_launch_typed(const AddLayerNormLaunch& p, const Launcher& launcher, bool backward) {
  if (p.cols <= 8 * kWarp) return add_layer_norm_launch_k<T, 8>(p, launcher, backward);
  if (p.cols <= 32 * kWarp) return add_layer_norm_launch_k<T, 32>(p, launcher, backward);
  add_layer_norm_launch_k<T, 0>(p, launcher, backward);
}

// The whole launch plan (nothing for an empty input).
template <typename Launcher>
void add_layer_norm_launch(const AddLayerNormLaunch& p, const Launcher& launcher, bool backward) {
  if (p.rows == 0 || p.cols == 0) return;
  cuda_elem::with_storage_type(p.dtype,
                               [&](auto tag) { add_layer_norm_launch_typed<decltype(tag)>(p, launcher, backward); });
}

}  // namespace
}  // namespace roformer::ops
