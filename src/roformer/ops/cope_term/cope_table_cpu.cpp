// CoPE's causal table products on the CPU (see cope_table_kernels.h): the forward's items are
// (pair, block of rows), each a product of the block's queries with the table's first reach
// columns written into its window; the backward's items are pairs, each d q of its rows and its
// share of d e over every block. Columns past the last whole 32 bytes take a plain loop.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <cstdint>

#include "roformer/ops/common/cpu_kernel_support.h"
#include "roformer/ops/common/cpu_vectors.h"
#include "roformer/ops/common/small_gemm.h"
#include "roformer/ops/cope_term/cope_table.h"
#include "roformer/ops/cope_term/cope_table_kernels.h"

namespace roformer::ops {
namespace cope_table_cpu {

constexpr int64_t kRows = kCausalTableBlockRows;

template <typename T>
constexpr int64_t whole_vectors(int64_t n) {  // the columns small_gemm takes: whole 32 bytes
  constexpr int64_t per = 32 / sizeof(T);
  return n / per * per;
}

template <typename T, int kBytes>
ROFORMER_ALWAYS_INLINE void forward_items(const CopeTableLaunch& p, int64_t first, int64_t last) {
  const int64_t S = p.seq, D = p.dim, P = p.positions, blocks = (S + kRows - 1) / kRows;
  const T* e = static_cast<const T*>(p.table);
  for (int64_t item = first; item < last; ++item) {
    const int64_t pair = item / blocks, begin = item % blocks * kRows, rows = std::min(kRows, S - begin);
    const int64_t reach = p.reach[item % blocks], main = whole_vectors<T>(reach);
    const T* q = static_cast<const T*>(p.q) + (pair * S + begin) * D;
    T* out = static_cast<T*>(p.out) + (pair * S + begin) * P;
    if (main > 0) small_gemm::gemm<T, false, kBytes>(rows, main, D, {q, D, 1}, e, P, out, P);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = main; c < reach; ++c) {
        T sum = 0;
        for (int64_t d = 0; d < D; ++d) sum += q[r * D + d] * e[d * P + c];
        out[r * P + c] = sum;
      }
      std::fill(out + r * P + reach, out + (r + 1) * P, T(0));
    }
  }
}

template <typename T, int kBytes>
ROFORMER_ALWAYS_INLINE void backward_pairs(const CopeTableLaunch& p, int64_t first, int64_t last) {
  const int64_t S = p.seq, D = p.dim, P = p.positions;
  const T* et = static_cast<const T*>(p.table_t);
  for (int64_t pair = first; pair < last; ++pair) {
    T* parts = static_cast<T*>(p.grad_table_parts) + pair * D * P;
    std::fill(parts, parts + D * P, T(0));
    for (int64_t begin = 0; begin < S; begin += kRows) {
      const int64_t rows = std::min(kRows, S - begin), reach = p.reach[begin / kRows], main = whole_vectors<T>(reach);
      const T* g = static_cast<const T*>(p.grad) + pair * p.grad_pair_stride + begin * p.grad_ld;
      const T* q = static_cast<const T*>(p.q) + (pair * S + begin) * D;
      T* dq = static_cast<T*>(p.grad_q) + (pair * S + begin) * D;
      small_gemm::gemm<T, false, kBytes>(rows, D, reach, {g, p.grad_ld, 1}, et, D, dq, D);                // G e^T
      if (main > 0) small_gemm::gemm<T, true, kBytes>(D, main, rows, {q, 1, D}, g, p.grad_ld, parts, P);  // q^T G
      for (int64_t d = 0; d < D; ++d)
        for (int64_t c = main; c < reach; ++c) {
          T sum = 0;
          for (int64_t r = 0; r < rows; ++r) sum += q[r * D + d] * g[r * p.grad_ld + c];
          parts[d * P + c] += sum;
        }
    }
  }
}

ROFORMER_VECTOR_WIDTH_KERNELS(forward_kernel, CopeTableLaunch, forward_items)
ROFORMER_VECTOR_WIDTH_KERNELS(backward_kernel, CopeTableLaunch, backward_pairs)

}  // namespace cope_table_cpu

bool cope_table_kernels_take(KernelDType dtype, int64_t dim) {
  const int64_t bytes = dtype == KernelDType::f64 ? 8 : dtype == KernelDType::f32 ? 4 : 0;
  return bytes > 0 && dim > 0 && dim * bytes % 32 == 0;
}

void cope_table_forward_cpu(const CopeTableLaunch& p) {
  using namespace cope_table_cpu;
  const auto items = forward_kernel(p.dtype);
  const int64_t count = p.pairs * ((p.seq + kRows - 1) / kRows);
  for_each_claim(count, 1, [&](int64_t first, int64_t last) { items(p, first, last); });
}

void cope_table_backward_cpu(const CopeTableLaunch& p) {
  using namespace cope_table_cpu;
  const auto items = backward_kernel(p.dtype);
  for_each_claim(p.pairs, 1, [&](int64_t first, int64_t last) { items(p, first, last); });
}

}  // namespace roformer::ops
