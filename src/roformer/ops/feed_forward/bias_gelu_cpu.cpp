// CPU kernels of the fused bias + GELU op. Forward: one pass over x writing GELU(x + bias).
// Backward: one pass over (x, grad) writing d loss / d x and, per block of rows, partial column
// sums for the bias gradient; the blocks are fixed (not per thread), so the result does not
// depend on the thread count. Float inner loops use gelu_fast (bias_gelu_math.h) and are
// compiled three times (x86-64-v4: AVX-512; v3: AVX2 + FMA; baseline) and picked at load time,
// so GCC vectorises them for the CPU at hand; this file is built with -fno-trapping-math,
// which lets GCC turn the math's selects into blends.
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "roformer/ops/common/cpu_kernel_support.h"
#include "roformer/ops/feed_forward/bias_gelu_kernels.h"

namespace roformer::ops {
namespace {

template <typename scalar_t>
using acc_type = cpu_acc_t<scalar_t>;

constexpr int64_t kRowsPerBlock = 32;  // backward: one partial bias-gradient row per block

// GELU(v) and its derivative: vectorisable approximations in float, the C library in double.
template <GeluKind kind, typename acc_t>
inline __attribute__((always_inline)) void gelu_cpu(acc_t v, acc_t* y, acc_t* dy) {
  if constexpr (std::is_same_v<acc_t, float>) {
    gelu_fast<kind>(v, y, dy);
  } else {
    gelu_accurate<kind>(v, y, dy);
  }
}

template <GeluKind kind, typename scalar_t>
inline __attribute__((always_inline)) void forward_rows(const BiasGeluLaunch& p, int64_t r0, int64_t r1) {
  using acc_t = acc_type<scalar_t>;
  const auto* bias = static_cast<const acc_t*>(p.bias);
  for (int64_t r = r0; r < r1; ++r) {
    const scalar_t* x = static_cast<const scalar_t*>(p.x) + r * p.cols;
    scalar_t* out = static_cast<scalar_t*>(p.out) + r * p.cols;
    for (int64_t j = 0; j < p.cols; ++j) {
      acc_t y, dy;
      gelu_cpu<kind>(static_cast<acc_t>(x[j]) + bias[j], &y, &dy);
      out[j] = static_cast<scalar_t>(y);
    }
  }
}

// Rows [r0, r1): d loss / d x into p.out, their column sums added to `sums` (cols values).
template <GeluKind kind, typename scalar_t>
inline __attribute__((always_inline)) void backward_rows(const BiasGeluLaunch& p, int64_t r0, int64_t r1,
                                                         acc_type<scalar_t>* sums) {
  using acc_t = acc_type<scalar_t>;
  const auto* bias = static_cast<const acc_t*>(p.bias);
  for (int64_t r = r0; r < r1; ++r) {
    const scalar_t* x = static_cast<const scalar_t*>(p.x) + r * p.cols;
    const scalar_t* g = static_cast<const scalar_t*>(p.grad) + r * p.cols;
    scalar_t* gx = static_cast<scalar_t*>(p.out) + r * p.cols;
    for (int64_t j = 0; j < p.cols; ++j) {
      acc_t y, dy;
      gelu_cpu<kind>(static_cast<acc_t>(x[j]) + bias[j], &y, &dy);
      const acc_t d = static_cast<acc_t>(g[j]) * dy;
      gx[j] = static_cast<scalar_t>(d);
      sums[j] += d;
    }
  }
}

// The GELU form is picked once per call, outside the inner loops.
template <typename scalar_t>
inline __attribute__((always_inline)) void forward_any(const BiasGeluLaunch& p, int64_t a, int64_t b) {
  if (p.kind == GeluKind::exact) {
    forward_rows<GeluKind::exact, scalar_t>(p, a, b);
  } else {
    forward_rows<GeluKind::tanh, scalar_t>(p, a, b);
  }
}
template <typename scalar_t>
inline __attribute__((always_inline)) void backward_any(const BiasGeluLaunch& p, int64_t a, int64_t b,
                                                        acc_type<scalar_t>* sums) {
  if (p.kind == GeluKind::exact) {
    backward_rows<GeluKind::exact, scalar_t>(p, a, b, sums);
  } else {
    backward_rows<GeluKind::tanh, scalar_t>(p, a, b, sums);
  }
}

// Float, the vectorised path, compiled for each x86-64 level above; other dtypes once (double
// calls the C library, half types convert element by element).
ROFORMER_CLONES void forward_f32(const BiasGeluLaunch& p, int64_t a, int64_t b) {
  forward_any<float>(p, a, b);
}
ROFORMER_CLONES void backward_f32(const BiasGeluLaunch& p, int64_t a, int64_t b, float* sums) {
  backward_any<float>(p, a, b, sums);
}

template <typename scalar_t>
void forward_block(const BiasGeluLaunch& p, int64_t a, int64_t b) {
  if constexpr (std::is_same_v<scalar_t, float>) {
    forward_f32(p, a, b);
  } else {
    forward_any<scalar_t>(p, a, b);
  }
}
template <typename scalar_t>
void backward_block(const BiasGeluLaunch& p, int64_t a, int64_t b, acc_type<scalar_t>* sums) {
  if constexpr (std::is_same_v<scalar_t, float>) {
    backward_f32(p, a, b, sums);
  } else {
    backward_any<scalar_t>(p, a, b, sums);
  }
}

template <typename scalar_t>
void forward_typed(const BiasGeluLaunch& p) {
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, p.cols));
  at::parallel_for(0, p.rows, grain, [&](int64_t a, int64_t b) { forward_block<scalar_t>(p, a, b); });
}

template <typename scalar_t>
void backward_typed(const BiasGeluLaunch& p) {
  using acc_t = acc_type<scalar_t>;
  const int64_t blocks = (p.rows + kRowsPerBlock - 1) / kRowsPerBlock;
  std::vector<acc_t> partial(static_cast<size_t>(blocks * p.cols), acc_t(0));
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, kRowsPerBlock * p.cols));
  at::parallel_for(0, blocks, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t r0 = blk * kRowsPerBlock, r1 = std::min(p.rows, r0 + kRowsPerBlock);
      backward_block<scalar_t>(p, r0, r1, partial.data() + blk * p.cols);
    }
  });
  if (!p.bias_grad) return;
  auto* out = static_cast<acc_t*>(p.bias_grad);
  std::fill(out, out + p.cols, acc_t(0));
  for (int64_t blk = 0; blk < blocks; ++blk) {  // in block order: the same sum for any thread count
    const acc_t* row = partial.data() + blk * p.cols;
    for (int64_t j = 0; j < p.cols; ++j) out[j] += row[j];
  }
}

}  // namespace

void bias_gelu_forward_cpu(const BiasGeluLaunch& launch) {
  with_storage_type(launch.dtype, [&](auto tag) { forward_typed<decltype(tag)>(launch); });
}

void bias_gelu_backward_cpu(const BiasGeluLaunch& launch) {
  with_storage_type(launch.dtype, [&](auto tag) { backward_typed<decltype(tag)>(launch); });
}

}  // namespace roformer::ops
