// Element conversions for the CUDA kernels (rope_cuda.cu, bias_gelu_cuda.cu): the accumulation
// type of a storage type (float for half and bfloat16) and the loads and stores between them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

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

}  // namespace roformer::ops::cuda_elem
