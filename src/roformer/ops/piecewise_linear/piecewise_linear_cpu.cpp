// CPU kernels of the piecewise-linear map. Each input finds its segment by a binary search over
// the kinks (the inputs come in any order), then every head's slope and intercept of that
// segment give its value; the backward gives the input's gradient from the same slopes and adds
// each head's gradient and gradient-times-input to that segment's partial sums of its chunk.
#include <vector>

#include "roformer/ops/common/cpu_kernel_support.h"
#include "roformer/ops/piecewise_linear/piecewise_linear_kernels.h"

namespace roformer::ops {
namespace {

// The number of kinks strictly below x (NaN: 0).
template <typename T>
ROFORMER_ALWAYS_INLINE int64_t segment(const T* kink, int64_t kinks, T x) {
  int64_t lo = 0, hi = kinks;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (kink[mid] < x) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

template <typename T>
void forward_range(const PiecewiseLinearLaunch& p, int64_t n0, int64_t n1) {
  const T* x = static_cast<const T*>(p.x);
  const T* slope = static_cast<const T*>(p.slope);
  const T* intercept = static_cast<const T*>(p.intercept);
  T* out = static_cast<T*>(p.out);
  const int64_t segments = p.kinks + 1;
  for (int64_t n = n0; n < n1; ++n) {
    const int64_t s = segment(static_cast<const T*>(p.kink), p.kinks, x[n]);
    for (int64_t h = 0; h < p.heads; ++h)
      out[h * p.inputs + n] = slope[h * segments + s] * x[n] + intercept[h * segments + s];
  }
}

// Chunk c of the inputs: d loss / d x, and the chunk's partial sums for slopes and intercepts.
template <typename T>
void backward_chunk(const PiecewiseLinearLaunch& p, int64_t c) {
  const T* x = static_cast<const T*>(p.x);
  const T* slope = static_cast<const T*>(p.slope);
  const T* g = static_cast<const T*>(p.grad);
  T* dx = static_cast<T*>(p.out);
  const int64_t segments = p.kinks + 1, table = p.heads * segments;
  T* ds = static_cast<T*>(p.grad_slope) + c * table;
  T* di = static_cast<T*>(p.grad_intercept) + c * table;
  std::fill(ds, ds + table, T(0));
  std::fill(di, di + table, T(0));
  const int64_t n1 = std::min(p.inputs, (c + 1) * kPiecewiseChunk);
  for (int64_t n = c * kPiecewiseChunk; n < n1; ++n) {
    const int64_t s = segment(static_cast<const T*>(p.kink), p.kinks, x[n]);
    T d = 0;
    for (int64_t h = 0; h < p.heads; ++h) {
      const T gh = g[h * p.inputs + n];
      d += gh * slope[h * segments + s];
      ds[h * segments + s] += gh * x[n];
      di[h * segments + s] += gh;
    }
    dx[n] = d;
  }
}

ROFORMER_CLONES void forward_f32(const PiecewiseLinearLaunch& p, int64_t n0, int64_t n1) {
  forward_range<float>(p, n0, n1);
}
ROFORMER_CLONES void backward_f32(const PiecewiseLinearLaunch& p, int64_t c) {
  backward_chunk<float>(p, c);
}

}  // namespace

void piecewise_linear_forward_cpu(const PiecewiseLinearLaunch& p) {
  for_each_claim(p.inputs, kPiecewiseChunk, [&](int64_t n0, int64_t n1) {
    if (p.dtype == KernelDType::f64) {
      forward_range<double>(p, n0, n1);
    } else {
      forward_f32(p, n0, n1);
    }
  });
}

void piecewise_linear_backward_cpu(const PiecewiseLinearLaunch& p) {
  const int64_t chunks = (p.inputs + kPiecewiseChunk - 1) / kPiecewiseChunk;
  for_each_claim(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      if (p.dtype == KernelDType::f64) {
        backward_chunk<double>(p, c);
      } else {
        backward_f32(p, c);
      }
    }
  });
}

}  // namespace roformer::ops
