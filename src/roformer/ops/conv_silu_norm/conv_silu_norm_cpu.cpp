// CPU kernels of the short convolution + SiLU + group norm op (see conv_silu_norm.h). Forward:
// per token, its channels' convolution over tokens t-2..t, SiLU, then each group's norm. Backward:
// per (sequence, chunk of 32 tokens), d u for the chunk's tokens and the two after it (row by row:
// d y = r g - r^3 y (g . y), d u = d y sigmoid(u) (1 + u (1 - sigmoid(u)))), then d x from the
// taps and the chunk's share of d weight. Float loops are compiled per x86-64 level (the
// sigmoid's exponential vectorises); double uses the C library's.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "roformer/ops/common/cpu_kernel_support.h"
#include "roformer/ops/common/exp_math.h"
#include "roformer/ops/conv_silu_norm/conv_silu_norm_kernels.h"

namespace roformer::ops {
namespace conv_silu_norm {

// Token t's u (the convolution) and sigmoid(u) over its C channels; taps [3, C] (tap 2: token t).
template <typename T>
ROFORMER_ALWAYS_INLINE void convolve(const T* x, const T* taps, int64_t t, int64_t C, T* u, T* sig) {
  const T *x0 = x + t * C, *w0 = taps, *w1 = taps + C, *w2 = taps + 2 * C;
  for (int64_t c = 0; c < C; ++c) u[c] = w2[c] * x0[c];
  if (t >= 1)
    for (int64_t c = 0; c < C; ++c) u[c] += w1[c] * x0[c - C];
  if (t >= 2)
    for (int64_t c = 0; c < C; ++c) u[c] += w0[c] * x0[c - 2 * C];
  for (int64_t c = 0; c < C; ++c) sig[c] = sigmoid(u[c]);
}

// 1 / sqrt(|y|^2 + eps) of one group's D values of y = u sig.
template <typename T>
ROFORMER_ALWAYS_INLINE T inverse_norm(const T* u, const T* sig, int64_t D, T eps) {
  T sum = 0;
  for (int64_t d = 0; d < D; ++d) {
    const T y = u[d] * sig[d];
    sum += y * y;
  }
  return T(1) / std::sqrt(sum + eps);
}

template <typename T>
ROFORMER_ALWAYS_INLINE void forward_tokens(const ConvSiluNormLaunch& p, const T* taps, int64_t first, int64_t last) {
  const int64_t C = p.groups * p.group, D = p.group;
  std::vector<T> u(C), sig(C);
  for (int64_t row = first; row < last; ++row) {
    const int64_t b = row / p.length, t = row % p.length;
    convolve(static_cast<const T*>(p.x) + b * p.length * C, taps, t, C, u.data(), sig.data());
    T* out = static_cast<T*>(p.out) + row * C;
    for (int64_t g = 0; g < p.groups; ++g) {
      const T r = inverse_norm(u.data() + g * D, sig.data() + g * D, D, static_cast<T>(p.eps));
      for (int64_t d = g * D; d < (g + 1) * D; ++d) out[d] = u[d] * sig[d] * r;
    }
  }
}

// d u of token t into du [C].
template <typename T>
ROFORMER_ALWAYS_INLINE void grad_of_u(const ConvSiluNormLaunch& p, const T* x, const T* taps, int64_t b, int64_t t,
                                      T* u, T* sig, T* du) {
  const int64_t C = p.groups * p.group, D = p.group;
  convolve(x, taps, t, C, u, sig);
  for (int64_t g = 0; g < p.groups; ++g) {
    const T* grad =
        static_cast<const T*>(p.grad) + b * p.grad_batch_stride + t * p.grad_token_stride + g * p.grad_group_stride;
    const T *ug = u + g * D, *sg = sig + g * D;
    const T r = inverse_norm(ug, sg, D, static_cast<T>(p.eps));
    T gy = 0;
    for (int64_t d = 0; d < D; ++d) gy += grad[d] * ug[d] * sg[d];
    const T r3gy = r * r * r * gy;
    T* dug = du + g * D;
    for (int64_t d = 0; d < D; ++d) {
      const T dy = r * grad[d] - r3gy * ug[d] * sg[d];
      dug[d] = dy * sg[d] * (T(1) + ug[d] * (T(1) - sg[d]));
    }
  }
}

template <typename T>
ROFORMER_ALWAYS_INLINE void backward_chunks(const ConvSiluNormLaunch& p, const T* taps, int64_t first, int64_t last) {
  const int64_t C = p.groups * p.group, S = p.length, chunks = (S + kConvSiluNormChunk - 1) / kConvSiluNormChunk;
  std::vector<T> u(C), sig(C), du((kConvSiluNormChunk + 2) * C);
  for (int64_t item = first; item < last; ++item) {
    const int64_t b = item / chunks, t0 = item % chunks * kConvSiluNormChunk, t1 = std::min(t0 + kConvSiluNormChunk, S);
    const int64_t reach = std::min(t1 + 2, S);  // d x of token t takes d u of t, t + 1 and t + 2
    const T* x = static_cast<const T*>(p.x) + b * S * C;
    for (int64_t t = t0; t < reach; ++t) grad_of_u(p, x, taps, b, t, u.data(), sig.data(), du.data() + (t - t0) * C);
    T* parts = static_cast<T*>(p.d_weight_parts) + item * 3 * C;
    std::fill(parts, parts + 3 * C, T(0));
    for (int64_t t = t0; t < t1; ++t) {
      const T* d0 = du.data() + (t - t0) * C;
      T* dx = static_cast<T*>(p.d_x) + (b * S + t) * C;
      for (int64_t c = 0; c < C; ++c) dx[c] = taps[2 * C + c] * d0[c];
      if (t + 1 < S)
        for (int64_t c = 0; c < C; ++c) dx[c] += taps[C + c] * d0[C + c];
      if (t + 2 < S)
        for (int64_t c = 0; c < C; ++c) dx[c] += taps[c] * d0[2 * C + c];
      for (int64_t c = 0; c < C; ++c) parts[2 * C + c] += d0[c] * x[t * C + c];
      if (t >= 1)
        for (int64_t c = 0; c < C; ++c) parts[C + c] += d0[c] * x[(t - 1) * C + c];
      if (t >= 2)
        for (int64_t c = 0; c < C; ++c) parts[c] += d0[c] * x[(t - 2) * C + c];
    }
  }
}

using Items = void (*)(const ConvSiluNormLaunch&, const void*, int64_t, int64_t);
ROFORMER_CLONES void forward_f32(const ConvSiluNormLaunch& p, const void* taps, int64_t first, int64_t last) {
  forward_tokens<float>(p, static_cast<const float*>(taps), first, last);
}
void forward_f64(const ConvSiluNormLaunch& p, const void* taps, int64_t first, int64_t last) {
  forward_tokens<double>(p, static_cast<const double*>(taps), first, last);
}
ROFORMER_CLONES void backward_f32(const ConvSiluNormLaunch& p, const void* taps, int64_t first, int64_t last) {
  backward_chunks<float>(p, static_cast<const float*>(taps), first, last);
}
void backward_f64(const ConvSiluNormLaunch& p, const void* taps, int64_t first, int64_t last) {
  backward_chunks<double>(p, static_cast<const double*>(taps), first, last);
}

// The weight [C, 3] as taps [3, C], so each tap's loop reads consecutive channels.
template <typename T>
std::vector<T> taps_of(const ConvSiluNormLaunch& p) {
  const int64_t C = p.groups * p.group;
  const T* w = static_cast<const T*>(p.weight);
  std::vector<T> taps(3 * C);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t j = 0; j < 3; ++j) taps[j * C + c] = w[c * 3 + j];
  return taps;
}

template <typename T>
void run(const ConvSiluNormLaunch& p, Items items, int64_t count, int64_t per_claim) {
  const std::vector<T> taps = taps_of<T>(p);
  for_each_claim(count, per_claim, [&](int64_t first, int64_t last) { items(p, taps.data(), first, last); });
}

}  // namespace conv_silu_norm

void conv_silu_norm_forward_cpu(const ConvSiluNormLaunch& p) {
  using namespace conv_silu_norm;
  if (p.dtype == KernelDType::f64) return run<double>(p, forward_f64, p.batch * p.length, 16);
  run<float>(p, forward_f32, p.batch * p.length, 16);
}

void conv_silu_norm_backward_cpu(const ConvSiluNormLaunch& p) {
  using namespace conv_silu_norm;
  const int64_t items = p.batch * ((p.length + kConvSiluNormChunk - 1) / kConvSiluNormChunk);
  if (p.dtype == KernelDType::f64) return run<double>(p, backward_f64, items, 1);
  run<float>(p, backward_f32, items, 1);
}

}  // namespace roformer::ops
