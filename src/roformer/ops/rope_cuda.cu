// CUDA kernels of roformer_core: the fused RoPE op and the toolchain smoke test.
// RoPE: one launch rotates every tensor (q, k and optionally v); one block per token, so the
// grid is sized by tokens (packed sequences waste no blocks); (cos, sin) of each pair are
// computed once per block into shared memory and reused by every head of every tensor; with
// contiguous, 16-byte aligned features, loads and stores are 128-bit vectors. The per-pair
// math comes from rope_math.h, the same code the CPU kernel runs. No LibTorch headers here.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "roformer/ops/cuda_selftest.h"
#include "roformer/ops/rope_kernels.h"

namespace roformer::ops {
namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

// ---- element conversions ------------------------------------------------------------------
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

template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Vec {
  T v[VEC];
};

// ---- the kernel ---------------------------------------------------------------------------
// VEC > 1: 128-bit vectors of VEC elements (requires unit feature stride and alignment);
// VEC == 1: one pair (or one tail element) per work item, any strides.
template <typename T, int VEC>
__global__ void rope_kernel(const RopeLaunch p) {
  using acc_t = typename Acc<T>::type;
  extern __shared__ unsigned char smem_raw[];
  acc_t* cos_s = reinterpret_cast<acc_t*>(smem_raw);  // [half]
  const int64_t half = p.rotary_dim / 2;
  acc_t* sin_s = cos_s + half;  // [half], sign folded in

  const int64_t tok = blockIdx.x;
  const int64_t b = tok / p.seq, s = tok % p.seq;
  const int64_t pos = rope_position(p, b, s);
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    acc_t c, sn;
    rope_sincos(rope_angle(pos, p.position_scale, p.inv_freq[i]), &c, &sn);
    cos_s[i] = c;
    sin_s[i] = sn * static_cast<acc_t>(p.sign);
  }
  __syncthreads();

  const int64_t tail = p.inplace ? 0 : p.head_dim - p.rotary_dim;
  // Rotary work items per head: vectors of VEC elements (interleaved: VEC/2 pairs; half: VEC
  // pairs, one vector from each half) or single pairs.
  const int64_t rot_items = VEC > 1 ? (p.interleaved ? p.rotary_dim / VEC : half / VEC) : half;
  const int64_t per_head = rot_items + tail;
  for (int j = 0; j < p.num_tensors; ++j) {
    const RopeTensorArgs& t = p.tensors[j];
    const acc_t mag = static_cast<acc_t>(t.magnitude);
    const T* in = static_cast<const T*>(t.in) + b * t.in_stride[0] + s * t.in_stride[1];
    T* out = static_cast<T*>(t.out) + b * t.out_stride[0] + s * t.out_stride[1];
    const int64_t items = t.heads * per_head;
    for (int64_t w = threadIdx.x; w < items; w += blockDim.x) {
      const int64_t h = w / per_head, r = w % per_head;
      const T* hin = in + h * t.in_stride[2];
      T* hout = out + h * t.out_stride[2];
      if (r >= rot_items) {  // pass-through tail element
        const int64_t d = p.rotary_dim + (r - rot_items);
        hout[d * t.out_stride[3]] = hin[d * t.in_stride[3]];
        continue;
      }
      if constexpr (VEC > 1) {
        using V = Vec<T, VEC>;
        if (p.interleaved) {
          const int64_t d = r * VEC;  // VEC/2 pairs starting at pair d/2
          const V x = *reinterpret_cast<const V*>(hin + d);
          V y;
#pragma unroll
          for (int e = 0; e < VEC; e += 2) {
            const int64_t i = d / 2 + e / 2;
            acc_t y0, y1;
            rope_rotate_pair(to_acc(x.v[e]), to_acc(x.v[e + 1]), cos_s[i] * mag, sin_s[i] * mag, &y0, &y1);
            y.v[e] = from_acc<T>(y0);
            y.v[e + 1] = from_acc<T>(y1);
          }
          *reinterpret_cast<V*>(hout + d) = y;
        } else {
          const int64_t i0 = r * VEC;  // pairs i0 .. i0+VEC-1
          const V x0 = *reinterpret_cast<const V*>(hin + i0);
          const V x1 = *reinterpret_cast<const V*>(hin + half + i0);
          V y0v, y1v;
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            acc_t y0, y1;
            rope_rotate_pair(to_acc(x0.v[e]), to_acc(x1.v[e]), cos_s[i0 + e] * mag, sin_s[i0 + e] * mag, &y0, &y1);
            y0v.v[e] = from_acc<T>(y0);
            y1v.v[e] = from_acc<T>(y1);
          }
          *reinterpret_cast<V*>(hout + i0) = y0v;
          *reinterpret_cast<V*>(hout + half + i0) = y1v;
        }
      } else {
        const int64_t i = r;
        const int64_t d0 = rope_first(p, i), d1 = rope_second(p, i);
        acc_t y0, y1;
        rope_rotate_pair(to_acc(hin[d0 * t.in_stride[3]]), to_acc(hin[d1 * t.in_stride[3]]), cos_s[i] * mag,
                         sin_s[i] * mag, &y0, &y1);
        hout[d0 * t.out_stride[3]] = from_acc<T>(y0);
        hout[d1 * t.out_stride[3]] = from_acc<T>(y1);
      }
    }
  }
}

// 128-bit vectors are possible when features are contiguous and every base pointer and stride
// keeps 16-byte alignment, and the rotary span splits into whole vectors.
template <typename T, int VEC>
bool vectorizable(const RopeLaunch& p) {
  const int64_t half = p.rotary_dim / 2;
  if (p.interleaved ? (p.rotary_dim % VEC != 0) : (half % VEC != 0)) return false;
  for (int j = 0; j < p.num_tensors; ++j) {
    const RopeTensorArgs& t = p.tensors[j];
    if (t.in_stride[3] != 1 || t.out_stride[3] != 1) return false;
    if (reinterpret_cast<uintptr_t>(t.in) % 16 != 0 || reinterpret_cast<uintptr_t>(t.out) % 16 != 0) return false;
    for (int k = 0; k < 3; ++k)
      if (t.in_stride[k] % VEC != 0 || t.out_stride[k] % VEC != 0) return false;
  }
  return true;
}

template <typename T>
void launch_typed(const RopeLaunch& p, cudaStream_t stream) {
  constexpr int VEC = static_cast<int>(16 / sizeof(T));
  const int64_t tokens = p.batch * p.seq;
  if (tokens == 0) return;
  const size_t smem = sizeof(typename Acc<T>::type) * static_cast<size_t>(p.rotary_dim);
  const dim3 grid(static_cast<unsigned>(tokens));
  const dim3 block(128);
  if (vectorizable<T, VEC>(p)) {
    rope_kernel<T, VEC><<<grid, block, smem, stream>>>(p);
  } else {
    rope_kernel<T, 1><<<grid, block, smem, stream>>>(p);
  }
  check(cudaGetLastError(), "rope_kernel launch");
}

__global__ void axpy_kernel(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

}  // namespace

void rope_cuda(const RopeLaunch& launch, void* stream) {
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  switch (launch.dtype) {
    case RopeDType::f32:
      return launch_typed<float>(launch, st);
    case RopeDType::f64:
      return launch_typed<double>(launch, st);
    case RopeDType::f16:
      return launch_typed<__half>(launch, st);
    case RopeDType::bf16:
      return launch_typed<__nv_bfloat16>(launch, st);
  }
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

double cuda_selftest(int n) {
  std::vector<float> x(n), y(n), expect(n);
  for (int i = 0; i < n; ++i) {
    x[i] = 0.5f * static_cast<float>(i);
    y[i] = 1.0f - static_cast<float>(i % 7);
    expect[i] = 3.0f * x[i] + y[i];
  }
  float *dx = nullptr, *dy = nullptr;
  check(cudaMalloc(&dx, n * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&dy, n * sizeof(float)), "cudaMalloc");
  check(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  axpy_kernel<<<(n + 255) / 256, 256>>>(n, 3.0f, dx, dy);
  check(cudaGetLastError(), "axpy_kernel launch");
  check(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(dx);
  cudaFree(dy);
  double err = 0;
  for (int i = 0; i < n; ++i) err = std::fmax(err, std::fabs(static_cast<double>(y[i]) - expect[i]));
  return err;
}

}  // namespace roformer::ops
