// What the CPU kernel files share (rope_cpu.cpp, bias_gelu_cpu.cpp, add_layer_norm_cpu.cpp):
// the accumulation type of a storage type, the dtype visitor, and ROFORMER_CLONES, which compiles
// a function for x86-64-v4 (AVX-512), v3 (AVX2 + FMA) and the baseline and picks one at load
// time, so vectorised inner loops use the widest registers the CPU has. These files are built
// with OpenMP (src/CMakeLists.txt) so at::parallel_for uses LibTorch's thread pool; a file that
// includes this header without it does not build rather than run silently serial.
#pragma once

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <atomic>
#include <type_traits>

#include "roformer/ops/common/kernel_dtype.h"

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#if !defined(_OPENMP) && !defined(ROFORMER_SERIAL_CPU_KERNELS)
#error "the CPU kernel files need OpenMP (-fopenmp) so at::parallel_for uses LibTorch's thread pool"
#endif

#include "roformer/ops/common/cpu_targets.h"  // ROFORMER_CLONES, ROFORMER_WIDE_TARGET

#define ROFORMER_ALWAYS_INLINE inline __attribute__((always_inline))

namespace roformer::ops {

// float for float, half and bfloat16; double for double.
template <typename scalar_t>
using cpu_acc_t = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;

// While alive, this thread's floating point flushes subnormal results to zero and reads subnormal
// operands as zero (MXCSR's FTZ and DAZ bits), as the kernels' loops want: a softmax row whose
// scores span more than ~87 (ALiBi's bias at a thousand tokens) has probabilities below float's
// smallest normal, and every product with them took a microcode assist (ALiBi trained 3x slower
// at 1024 tokens in the short kernel). The previous mode comes back on destruction.
class FlushSubnormals {
 public:
#if defined(__x86_64__)
  FlushSubnormals() : saved_(_mm_getcsr()) {
    _mm_setcsr(saved_ | 0x8040u);
  }
  ~FlushSubnormals() {
    _mm_setcsr(saved_);
  }
#endif
  FlushSubnormals(const FlushSubnormals&) = delete;
  FlushSubnormals& operator=(const FlushSubnormals&) = delete;

 private:
#if defined(__x86_64__)
  unsigned saved_;
#endif
};

// Calls fn(first, last) for consecutive runs of `per_claim` items of [0, count), the threads of
// LibTorch's pool claiming them from a shared counter: a thread slowed by a neighbour process takes
// fewer instead of leaving the others waiting at the end of the region. Subnormals flush to zero
// inside (FlushSubnormals). Which thread runs a claim
// varies; callers compute each item in a fixed way so the result does not.
template <typename Fn>
void for_each_claim(int64_t count, int64_t per_claim, Fn fn) {
  const int64_t claims = (count + per_claim - 1) / per_claim;
  std::atomic<int64_t> next{0};
  at::parallel_for(0, std::min<int64_t>(at::get_num_threads(), claims), 1, [&](int64_t, int64_t) {
    const FlushSubnormals flush;
    for (int64_t first; (first = next.fetch_add(per_claim, std::memory_order_relaxed)) < count;)
      fn(first, std::min(first + per_claim, count));
  });
}

// Defines, in the current namespace, `name(KernelDType)`: a `void (*)(const Launch&, int64_t first,
// int64_t last)` that runs body<T, kBytes>(launch, first, last) compiled for the dtype (f32 or
// f64) and the CPU's vector width: float per x86-64 level with 32-byte vectors, or with AVX-512's
// 64-byte vectors where cpu_vector_bytes() says so; double (the tests' precision) with 32-byte
// vectors. body must be always inlined. Needs common/cpu_vectors.h.
#define ROFORMER_VECTOR_WIDTH_KERNELS(name, Launch, body)                               \
  namespace name##_compiled {                                                           \
    ROFORMER_CLONES void f32(const Launch& p, int64_t first, int64_t last) {            \
      body<float, 32>(p, first, last);                                                  \
    }                                                                                   \
    ROFORMER_WIDE_TARGET void f32_wide(const Launch& p, int64_t first, int64_t last) {  \
      body<float, ROFORMER_WIDE_VECTORS ? 64 : 32>(p, first, last);                     \
    }                                                                                   \
    void f64(const Launch& p, int64_t first, int64_t last) {                            \
      body<double, 32>(p, first, last);                                                 \
    }                                                                                   \
  }                                                                                     \
  inline void (*name(KernelDType dtype))(const Launch&, int64_t, int64_t) {             \
    if (dtype == KernelDType::f64) return name##_compiled::f64;                         \
    return cpu_vector_bytes() == 64 ? name##_compiled::f32_wide : name##_compiled::f32; \
  }

// Calls f with a value of the storage type of `dtype`.
template <typename F>
void with_storage_type(KernelDType dtype, F&& f) {
  switch (dtype) {
    case KernelDType::f32:
      return f(float{});
    case KernelDType::f64:
      return f(double{});
    case KernelDType::f16:
      return f(c10::Half{});
    case KernelDType::bf16:
      return f(c10::BFloat16{});
  }
}

}  // namespace roformer::ops
