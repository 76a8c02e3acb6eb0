// The fused bias + GELU op's CUDA kernels and their launch plan, for nvcc (bias_gelu_cuda.cu)
// and for a host compiler (the host-emulation tests, through cuda_elem.cuh): a block per row
// (grid-stride over rows), threads across the columns, so loads and stores are coalesced and
// the bias index needs no division. Forward writes GELU(x + bias); backward writes
// d loss / d x (bias_gelu.cpp sums its columns). GELU and its derivative come from
// bias_gelu_math.h with erff / expf / tanhf, in float for half and bfloat16. The kernels live in
// an unnamed namespace: each including file gets its own copies (see rope_cuda_kernels.cuh).
#pragma once

#include <algorithm>
#include <cstdint>

#include "roformer/ops/common/cuda_elem.cuh"
#include "roformer/ops/feed_forward/bias_gelu_kernels.h"

namespace roformer::ops {
namespace {  // NOLINT(build/namespaces): per including file

using cuda_elem::Acc;
using cuda_elem::from_acc;
using cuda_elem::to_acc;

constexpr int kThreads = 256;

template <GeluKind kind, typename T>
__global__ void bias_gelu_forward_kernel(const BiasGeluLaunch p) {
  using acc_t = typename Acc<T>::type;
  const auto* bias = static_cast<const acc_t*>(p.bias);
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const T* x = static_cast<const T*>(p.x) + r * p.cols;
    T* out = static_cast<T*>(p.out) + r * p.cols;
    for (int64_t j = threadIdx.x; j < p.cols; j += blockDim.x) {
      acc_t y, dy;
      gelu_accurate<kind>(to_acc(x[j]) + bias[j], &y, &dy);
      out[j] = from_acc<T>(y);
    }
  }
}

template <GeluKind kind, typename T>
__global__ void bias_gelu_backward_kernel(const BiasGeluLaunch p) {
  using acc_t = typename Acc<T>::type;
  const auto* bias = static_cast<const acc_t*>(p.bias);
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const T* x = static_cast<const T*>(p.x) + r * p.cols;
    const T* g = static_cast<const T*>(p.grad) + r * p.cols;
    T* gx = static_cast<T*>(p.out) + r * p.cols;
    for (int64_t j = threadIdx.x; j < p.cols; j += blockDim.x) {
      acc_t y, dy;
      gelu_accurate<kind>(to_acc(x[j]) + bias[j], &y, &dy);
      gx[j] = from_acc<T>(to_acc(g[j]) * dy);
    }
  }
}

// Launches the forward or backward kernel of storage type T through `launcher`
// (cuda_elem::StreamLauncher on a GPU).
template <typename T, typename Launcher>
void bias_gelu_launch_typed(const BiasGeluLaunch& p, const Launcher& launcher, bool backward) {
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(p.rows, 65535 * 8));
  const unsigned threads = static_cast<unsigned>(std::min<int64_t>(kThreads, ((p.cols + 31) / 32) * 32));
  const bool exact = p.kind == GeluKind::exact;
  if (backward) {
    if (exact)
      launcher(bias_gelu_backward_kernel<GeluKind::exact, T>, blocks, threads, 0, p);
    else
      launcher(bias_gelu_backward_kernel<GeluKind::tanh, T>, blocks, threads, 0, p);
  } else {
    if (exact)
      launcher(bias_gelu_forward_kernel<GeluKind::exact, T>, blocks, threads, 0, p);
    else
      launcher(bias_gelu_forward_kernel<GeluKind::tanh, T>, blocks, threads, 0, p);
  }
}

// The whole launch plan (nothing for an empty input).
template <typename Launcher>
void bias_gelu_launch(const BiasGeluLaunch& p, const Launcher& launcher, bool backward) {
  if (p.rows == 0 || p.cols == 0) return;
  cuda_elem::with_storage_type(p.dtype,
                               [&](auto tag) { bias_gelu_launch_typed<decltype(tag)>(p, launcher, backward); });
}

}  // namespace
}  // namespace roformer::ops
