// CUDA kernels of the fused bias + GELU op: a block per row (grid-stride over rows), threads
// across the columns, so loads and stores are coalesced and the bias index needs no division.
// Forward writes GELU(x + bias); backward writes d loss / d x (bias_gelu.cpp sums its columns).
// GELU and its derivative come from bias_gelu_math.h with CUDA's erff / expf / tanhf, in float
// for half and bfloat16. No LibTorch headers here.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "roformer/ops/bias_gelu_kernels.h"
#include "roformer/ops/cuda_elem.cuh"

namespace roformer::ops {
namespace {

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

template <typename T>
void launch_typed(const BiasGeluLaunch& p, cudaStream_t stream, bool backward) {
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(p.rows, 65535 * 8));
  const unsigned threads = static_cast<unsigned>(std::min<int64_t>(kThreads, ((p.cols + 31) / 32) * 32));
  const bool exact = p.kind == GeluKind::exact;
  if (backward) {
    if (exact)
      bias_gelu_backward_kernel<GeluKind::exact, T><<<blocks, threads, 0, stream>>>(p);
    else
      bias_gelu_backward_kernel<GeluKind::tanh, T><<<blocks, threads, 0, stream>>>(p);
  } else {
    if (exact)
      bias_gelu_forward_kernel<GeluKind::exact, T><<<blocks, threads, 0, stream>>>(p);
    else
      bias_gelu_forward_kernel<GeluKind::tanh, T><<<blocks, threads, 0, stream>>>(p);
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw std::runtime_error(std::string("bias_gelu kernel launch: ") + cudaGetErrorString(err));
}

void launch(const BiasGeluLaunch& p, void* stream, bool backward) {
  if (p.rows == 0 || p.cols == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  cuda_elem::with_storage_type(p.dtype, [&](auto tag) { launch_typed<decltype(tag)>(p, s, backward); });
}

}  // namespace

void bias_gelu_forward_cuda(const BiasGeluLaunch& launch_desc, void* stream) {
  launch(launch_desc, stream, /*backward=*/false);
}

void bias_gelu_backward_cuda(const BiasGeluLaunch& launch_desc, void* stream) {
  launch(launch_desc, stream, /*backward=*/true);
}

}  // namespace roformer::ops
