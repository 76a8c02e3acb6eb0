// What the CUDA kernel files share (rope_cuda.cu, bias_gelu_cuda.cu, add_layer_norm_cuda.cu):
// the accumulation type of a storage type (float for half and bfloat16), the loads and stores
// between them, and the host-side dtype visitor that picks a kernel's instantiation.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "roformer/ops/kernel_dtype.h"

namespace roformer::ops::cuda_elem {

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
