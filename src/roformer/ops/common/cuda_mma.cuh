// One warp's tensor-core product D = A B + C of shape m16n8k16 (PTX `mma.sync.aligned.m16n8k16
// .row.col.f32.{bf16,f16}`), its operands in the PTX ISA's fragment layout ("Matrix Fragments for
// mma.m16n8k16 with floating point type"): with g = lane / 4 and t = lane % 4,
//   A (16 x 16, four registers of two 16-bit values): a[0] row g, columns 2t and 2t + 1;
//     a[1] row g + 8, the same columns; a[2] and a[3] as a[0] and a[1], 8 columns on;
//   B (16 x 8, two registers): b[0] rows 2t and 2t + 1 of column g; b[1] 8 rows on;
//   C and D (16 x 8 floats): c[0], c[1] row g, columns 2t and 2t + 1; c[2], c[3] row g + 8.
// nvcc emits the instruction (sm_80 and later; older devices trap, and the launch plans never
// send them there); a host compiler computes the same product from every lane's fragments
// (cuda_host_emulator.h's warp_all_gather), summing in float in k order.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "roformer/ops/common/cuda_elem.cuh"

namespace roformer::ops::cuda_mma {

// Two 16-bit values (low: the first) in one register, from floats rounded to nearest.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  static_assert(std::is_same<T, __nv_bfloat16>::value || std::is_same<T, __half>::value, "16-bit types only");
  T v[2] = {cuda_elem::from_acc<T>(lo), cuda_elem::from_acc<T>(hi)};
  uint32_t bits;
  memcpy(&bits, v, sizeof(bits));
  return bits;
}

// The register holding p[0] and p[1] (4-byte aligned).
template <typename T>
__device__ __forceinline__ uint32_t load2(const T* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

#if !defined(__CUDACC__)
// A register's two 16-bit values as floats.
template <typename T>
inline void unpack2(uint32_t bits, float& lo, float& hi) {
  T v[2];
  std::memcpy(static_cast<void*>(v), &bits, sizeof(bits));
  lo = cuda_elem::to_acc(v[0]);
  hi = cuda_elem::to_acc(v[1]);
}

// The product from every lane's fragments (see the layout above).
template <typename T>
void mma_on_host(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  struct Lane {
    uint32_t a[4], b[2];
  };
  Lane mine, all[cuda_host::kWarpSize];
  std::memcpy(mine.a, a, sizeof(mine.a));
  std::memcpy(mine.b, b, sizeof(mine.b));
  cuda_host::warp_all_gather(mine, all);
  float A[16][16], B[16][8];
  for (int lane = 0; lane < cuda_host::kWarpSize; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int r = 0; r < 4; ++r)  // a[r]: rows g (+8 for r odd), columns 2t (+8 for r >= 2)
      unpack2<T>(all[lane].a[r], A[g + 8 * (r & 1)][2 * t + 8 * (r >> 1)],
                 A[g + 8 * (r & 1)][2 * t + 8 * (r >> 1) + 1]);
    for (int r = 0; r < 2; ++r) unpack2<T>(all[lane].b[r], B[2 * t + 8 * r][g], B[2 * t + 8 * r + 1][g]);
  }
  const int lane = static_cast<int>(threadIdx.x % cuda_host::kWarpSize), g = lane / 4, t = lane % 4;
  for (int i = 0; i < 4; ++i) {
    const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
    float sum = d[i];
    for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
    d[i] = sum;
  }
}
#endif

// d += a b for one warp (every lane calls it, converged).
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#else
  __trap();  // before sm_80: the launch plans never get here
#endif
#else
  mma_on_host<T>(d, a, b);
#endif
}

}  // namespace roformer::ops::cuda_mma
