// What the CUDA kernel headers share (rope_cuda_kernels.cuh, bias_gelu_cuda_kernels.cuh,
// add_layer_norm_cuda_kernels.cuh): the accumulation type of a storage type (float for half and
// bfloat16), the loads and stores between them, dynamic shared memory, the host-side dtype
// visitor that picks a kernel's instantiation, and StreamLauncher, the `<<<...>>>` launch the
// headers' launch plans call. Compiled by a host compiler (tests), the headers get the CUDA
// built-ins from cuda_host_emulator.h and launch through its HostLauncher instead.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>

#include "roformer/ops/common/kernel_dtype.h"

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#else
#include "roformer/ops/common/cuda_host_emulator.h"
#endif

namespace roformer::ops::cuda_elem {

// The launch's dynamic shared memory (`extern __shared__`), at least 16-byte aligned.
#if defined(__CUDACC__)
__device__ __forceinline__ unsigned char* dynamic_shared_memory() {
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  return dynamic_smem;
}

// kernel<<<grid, block, shared_bytes, stream>>>(args...): what the launch plans call on a GPU.
// Past the 48 KiB a kernel gets by default it opts in first (cuda_host::kMaxDynamicSharedOptIn
// bounds what a plan may ask); a refusal surfaces as the launch's error (cudaGetLastError).
struct StreamLauncher {
  cudaStream_t stream;
  template <typename... Params, typename... Args>
  void operator()(void (*kernel)(Params...), unsigned grid, unsigned block, size_t shared_bytes,
                  const Args&... args) const {
    if (shared_bytes > 48 * 1024 &&
        cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(shared_bytes)) != cudaSuccess)
      return;
    kernel<<<grid, block, shared_bytes, stream>>>(args...);
  }
};
#else
inline unsigned char* dynamic_shared_memory() {
  return cuda_host::dynamic_shared_memory();
}
#endif

template <typename T>
struct Acc {
  using type = float;
};
template <>
struct Acc<double> {
  using type = double;
};

__device__ __forceinline__ float to_acc(float x) {
  return x;
}
__device__ __forceinline__ double to_acc(double x) {
  return x;
}
__device__ __forceinline__ float to_acc(__half x) {
  return __half2float(x);
}
__device__ __forceinline__ float to_acc(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <typename T>
__device__ __forceinline__ T from_acc(typename Acc<T>::type x);
template <>
__device__ __forceinline__ float from_acc<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ double from_acc<double>(double x) {
  return x;
}
template <>
__device__ __forceinline__ __half from_acc<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Calls f with a value of the CUDA storage type of `dtype` (host code).
template <typename F>
void with_storage_type(KernelDType dtype, F&& f) {
  switch (dtype) {
    case KernelDType::f32:
      return f(float{});
    case KernelDType::f64:
      return f(double{});
    case KernelDType::f16:
      return f(__half{});
    case KernelDType::bf16:
      return f(__nv_bfloat16{});
  }
}

}  // namespace roformer::ops::cuda_elem
