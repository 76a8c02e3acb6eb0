// CPU kernels of the fused residual add + LayerNorm op. Forward, per row: v = x + residual into a
// scratch row in the accumulation type, its mean and then its squared deviations summed over 16
// fixed lanes (GCC vectorises them, and the order, hence the bits, does not depend on the thread
// count), y = xhat w + b. Backward, per row: xhat and g w recomputed from the saved mean and rstd,
// the two row means, dL/dv; per fixed block of 32 rows, partial dL/dw and dL/db rows, then added
// up in block order. Formulas: add_layer_norm_math.h. Float rows are
// compiled per x86-64 level (ROFORMER_CLONES); other dtypes once.
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "roformer/ops/add_layer_norm/add_layer_norm_kernels.h"
#include "roformer/ops/common/cpu_kernel_support.h"

namespace roformer::ops {
namespace {

constexpr int kLanes = 16;
constexpr int64_t kRowsPerBlock = 32;  // backward: one partial gradient row per block

// Sum of f(j) for j in [0, n): lane l takes j = l mod 16, the lanes are added pairwise.
template <typename acc_t, typename F>
ROFORMER_ALWAYS_INLINE acc_t lane_sum(int64_t n, F&& f) {
  acc_t lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += f(j + l);
  for (int l = 0; j + l < n; ++l) lanes[l] += f(j + l);
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  return lanes[0];
}

// Rows [r0, r1); v is a scratch row of cols values.
template <typename scalar_t>
ROFORMER_ALWAYS_INLINE void forward_rows(const AddLayerNormLaunch& p, int64_t r0, int64_t r1, cpu_acc_t<scalar_t>* v) {
  using acc_t = cpu_acc_t<scalar_t>;
  const int64_t n = p.cols;
  const auto* w = static_cast<const acc_t*>(p.weight);
  const auto* b = static_cast<const acc_t*>(p.bias);
  for (int64_t r = r0; r < r1; ++r) {
    const scalar_t* x = static_cast<const scalar_t*>(p.x) + r * n;
    const scalar_t* res = static_cast<const scalar_t*>(p.residual) + r * n;
    scalar_t* out = static_cast<scalar_t*>(p.out) + r * n;
    for (int64_t j = 0; j < n; ++j) v[j] = static_cast<acc_t>(x[j]) + static_cast<acc_t>(res[j]);
    const acc_t mean = lane_sum<acc_t>(n, [&](int64_t j) { return v[j]; }) / static_cast<acc_t>(n);
    const acc_t sq = lane_sum<acc_t>(n, [&](int64_t j) {
      const acc_t d = v[j] - mean;
      return d * d;
    });
    const acc_t rstd = ln_rstd(sq, n, p.eps);
    for (int64_t j = 0; j < n; ++j) out[j] = static_cast<scalar_t>(ln_affine(ln_xhat(v[j], mean, rstd), w[j], b[j]));
    static_cast<acc_t*>(p.mean)[r] = mean;
    static_cast<acc_t*>(p.rstd)[r] = rstd;
  }
}

// One row's xhat and g w into scratch rows, g xhat and g added to the partial sums. Restrict
// pointers: without them GCC cannot prove the six arrays apart and leaves the loop scalar.
template <typename scalar_t, typename acc_t>
ROFORMER_ALWAYS_INLINE void row_terms(int64_t n, const scalar_t* __restrict x, const scalar_t* __restrict res,
                                      const scalar_t* __restrict g, const acc_t* __restrict w, acc_t mean, acc_t rstd,
                                      acc_t* __restrict xhat, acc_t* __restrict gw, acc_t* __restrict wsum,
                                      acc_t* __restrict bsum) {
  for (int64_t j = 0; j < n; ++j) {
    const acc_t xh = ln_xhat(static_cast<acc_t>(x[j]) + static_cast<acc_t>(res[j]), mean, rstd);
    const acc_t gj = static_cast<acc_t>(g[j]);
    xhat[j] = xh;
    gw[j] = gj * w[j];
    wsum[j] += gj * xh;
    bsum[j] += gj;
  }
}

template <typename scalar_t, typename acc_t>
ROFORMER_ALWAYS_INLINE void row_grad_in(int64_t n, const acc_t* __restrict xhat, const acc_t* __restrict gw, acc_t rstd,
                                        acc_t mean_gw, acc_t mean_gw_xhat, scalar_t* __restrict gin) {
  for (int64_t j = 0; j < n; ++j)
    gin[j] = static_cast<scalar_t>(ln_grad_in(gw[j], xhat[j], rstd, mean_gw, mean_gw_xhat));
}

// Rows [r0, r1): dL/dv into p.grad_in, g xhat and g added to wsum and bsum (cols values each);
// xhat and gw are scratch rows.
template <typename scalar_t>
ROFORMER_ALWAYS_INLINE void backward_rows(const AddLayerNormLaunch& p, int64_t r0, int64_t r1,
                                          cpu_acc_t<scalar_t>* xhat, cpu_acc_t<scalar_t>* gw, cpu_acc_t<scalar_t>* wsum,
                                          cpu_acc_t<scalar_t>* bsum) {
  using acc_t = cpu_acc_t<scalar_t>;
  const int64_t n = p.cols;
  const acc_t inv_n = acc_t(1) / static_cast<acc_t>(n);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t o = r * n;
    const acc_t mean = static_cast<const acc_t*>(p.mean)[r], rstd = static_cast<const acc_t*>(p.rstd)[r];
    row_terms(n, static_cast<const scalar_t*>(p.x) + o, static_cast<const scalar_t*>(p.residual) + o,
              static_cast<const scalar_t*>(p.grad) + o, static_cast<const acc_t*>(p.weight), mean, rstd, xhat, gw, wsum,
              bsum);
    const acc_t mean_gw = lane_sum<acc_t>(n, [&](int64_t j) { return gw[j]; }) * inv_n;
    const acc_t mean_gw_xhat = lane_sum<acc_t>(n, [&](int64_t j) { return gw[j] * xhat[j]; }) * inv_n;
    row_grad_in(n, xhat, gw, rstd, mean_gw, mean_gw_xhat, static_cast<scalar_t*>(p.grad_in) + o);
  }
}

ROFORMER_CLONES void forward_f32(const AddLayerNormLaunch& p, int64_t r0, int64_t r1, float* v) {
  forward_rows<float>(p, r0, r1, v);
}
ROFORMER_CLONES void backward_f32(const AddLayerNormLaunch& p, int64_t r0, int64_t r1, float* xhat, float* gw,
                                  float* wsum, float* bsum) {
  backward_rows<float>(p, r0, r1, xhat, gw, wsum, bsum);
}

template <typename scalar_t>
void forward_typed(const AddLayerNormLaunch& p) {
  using acc_t = cpu_acc_t<scalar_t>;
  const int64_t grain = std::max<int64_t>(1, 16384 / p.cols);
  at::parallel_for(0, p.rows, grain, [&](int64_t r0, int64_t r1) {
    std::vector<acc_t> v(static_cast<size_t>(p.cols));
    if constexpr (std::is_same_v<scalar_t, float>) {
      forward_f32(p, r0, r1, v.data());
    } else {
      forward_rows<scalar_t>(p, r0, r1, v.data());
    }
  });
}

template <typename scalar_t>
void backward_typed(const AddLayerNormLaunch& p) {
  using acc_t = cpu_acc_t<scalar_t>;
  const int64_t blocks = (p.rows + kRowsPerBlock - 1) / kRowsPerBlock;
  std::vector<acc_t> wpart(static_cast<size_t>(blocks * p.cols), acc_t(0));
  std::vector<acc_t> bpart(static_cast<size_t>(blocks * p.cols), acc_t(0));
  const int64_t grain = std::max<int64_t>(1, 16384 / (kRowsPerBlock * p.cols));
  at::parallel_for(0, blocks, grain, [&](int64_t k0, int64_t k1) {
    std::vector<acc_t> scratch(static_cast<size_t>(2 * p.cols));
    for (int64_t k = k0; k < k1; ++k) {
      acc_t* wsum = wpart.data() + k * p.cols;
      acc_t* bsum = bpart.data() + k * p.cols;
      const int64_t r0 = k * kRowsPerBlock, r1 = std::min(p.rows, r0 + kRowsPerBlock);
      if constexpr (std::is_same_v<scalar_t, float>) {
        backward_f32(p, r0, r1, scratch.data(), scratch.data() + p.cols, wsum, bsum);
      } else {
        backward_rows<scalar_t>(p, r0, r1, scratch.data(), scratch.data() + p.cols, wsum, bsum);
      }
    }
  });
  auto* wgrad = static_cast<acc_t*>(p.weight_grad);
  auto* bgrad = static_cast<acc_t*>(p.bias_grad);
  std::fill(wgrad, wgrad + p.cols, acc_t(0));
  std::fill(bgrad, bgrad + p.cols, acc_t(0));
  for (int64_t k = 0; k < blocks; ++k) {  // in block order
    const acc_t* wrow = wpart.data() + k * p.cols;
    const acc_t* brow = bpart.data() + k * p.cols;
    for (int64_t j = 0; j < p.cols; ++j) {
      wgrad[j] += wrow[j];
      bgrad[j] += brow[j];
    }
  }
}

}  // namespace

void add_layer_norm_forward_cpu(const AddLayerNormLaunch& launch) {
  with_storage_type(launch.dtype, [&](auto tag) { forward_typed<decltype(tag)>(launch); });
}

void add_layer_norm_backward_cpu(const AddLayerNormLaunch& launch) {
  with_storage_type(launch.dtype, [&](auto tag) { backward_typed<decltype(tag)>(launch); });
}

}  // namespace roformer::ops
