// PaTH's attention in blocks on the CPU (see path_blocks.h). Forward, per (pair, query block c):
// the block's own scores, then its rows carried back block by block (rows <- rows x the product
// of the block just scored) against each earlier key block's carried keys, under an online
// softmax with the values (FlashAttention's forward). Backward, per pair: each query block's
// walked rows recomputed, then its key blocks visited from the first up, carrying the rows'
// gradient G (d loss / d rows where the walk reached) as G <- dS C_m + G product_m^T, while
// d product_m gains walked_m^T G, d C_m gains dS^T walked_m and d v_m gains P^T dO; a pair runs on
// one thread, so its key blocks' gradients gather without atomics.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "roformer/ops/common/cpu_kernel_support.h"
#include "roformer/ops/common/cpu_vectors.h"
#include "roformer/ops/common/small_gemm.h"
#include "roformer/ops/tile_attention/path_blocks_kernels.h"
#include "roformer/ops/tile_attention/tile_attention_grad_loop.h"
#include "roformer/ops/tile_attention/tile_attention_loop.h"

namespace roformer::ops {
namespace path_blocks {

using small_gemm::Strided;

// The launch's tensors as T: blocks of the block-major ones, rows of the [B, H, S, ...] ones.
template <typename T>
struct View {
  const PathBlockLaunch& p;
  int64_t n, b, D, S, padded;
  explicit View(const PathBlockLaunch& launch)
      : p(launch),
        n(launch.blocks),
        b(launch.block),
        D(launch.head_dim),
        S(launch.length),
        padded(launch.blocks * launch.block) {}
  template <typename P>
  P* block(P* base, int64_t m, int64_t pair, int64_t size) const {
    return base + (m * p.pairs + pair) * size;
  }
  const T* in_row(const PairRows& x, int64_t pair, int64_t t) const { return x.row<const T>(pair, t); }
  T* out_row(const PairRows& x, int64_t pair, int64_t t) const { return x.row<T>(pair, t); }
  const T* in(const void* x) const { return static_cast<const T*>(x); }
  T* out(void* x) const { return static_cast<T*>(x); }
  int64_t rows_of(int64_t c) const { return std::min(b, S - c * b); }
};

// The scores of query block c's rows [0, rows) with key block m as the softmax takes them:
// scale x (raw + c_i - c_j) with FoX's gate, else scale x raw.
template <typename T>
ROFORMER_ALWAYS_INLINE void scale_scores(const View<T>& v, int64_t pair, int64_t c, int64_t m, int64_t rows, T* s) {
  const T scale = static_cast<T>(v.p.scale);
  const int64_t b = v.b;
  if (v.p.gate == nullptr) {
    for (int64_t e = 0; e < rows * b; ++e) s[e] *= scale;
    return;
  }
  const T* g = v.in(v.p.gate) + pair * v.S;
  const int64_t keys = std::min(b, v.S - m * b);
  for (int64_t r = 0; r < rows; ++r) {
    const T at_query = g[c * b + r];
    for (int64_t j = 0; j < keys; ++j) s[r * b + j] = s[r * b + j] * scale + (at_query - g[m * b + j]) * scale;
    for (int64_t j = keys; j < b; ++j) s[r * b + j] *= scale;  // keys past the end: no query sees them
  }
}

template <typename T>
struct ForwardScratch {
  std::vector<T> scores, acc, walk, next, maximum, sum;
  ForwardScratch(int64_t b, int64_t D) : scores(b * b), acc(b * D), walk(b * D), next(b * D), maximum(b), sum(b) {}
};

template <int kBytes, typename T>
ROFORMER_ALWAYS_INLINE void forward_item(const View<T>& v, int64_t pair, int64_t c, ForwardScratch<T>& w) {
  const int64_t b = v.b, D = v.D, rows = v.rows_of(c);
  T *s = w.scores.data(), *acc = w.acc.data(), *walk = w.walk.data(), *next = w.next.data();
  std::copy_n(v.block(v.in(v.p.own), c, pair, b * b), rows * b, s);
  scale_scores(v, pair, c, c, rows, s);
  for (int64_t r = 0; r < rows; ++r) {
    w.maximum[r] = -std::numeric_limits<T>::infinity();
    w.sum[r] = 0;
    tile_loop::softmax_step<kBytes>(s + r * b, r + 1, b, w.maximum[r], w.sum[r]);  // keys j <= i
  }
  const int64_t v_stride = v.p.v.token_stride;
  small_gemm::gemm<T, false, kBytes>(rows, D, rows, Strided<T>{s, b, 1}, v.in_row(v.p.v, pair, c * b), v_stride, acc, D,
                                     small_gemm::Limit::sum_to_row_end);  // weights past the diagonal are 0
  if (c > 0) std::copy_n(v.block(v.in(v.p.rows), c, pair, b * D), rows * D, walk);
  for (int64_t m = c - 1; m >= 0; --m) {
    small_gemm::gemm<T, false, kBytes>(rows, b, D, Strided<T>{walk, D, 1}, v.block(v.in(v.p.carried_t), m, pair, D * b),
                                       b, s, b);
    scale_scores(v, pair, c, m, rows, s);
    for (int64_t r = 0; r < rows; ++r) {
      const T factor = tile_loop::softmax_step<kBytes>(s + r * b, b, b, w.maximum[r], w.sum[r]);
      if (factor != T(1))
        for (int64_t d = 0; d < D; ++d) acc[r * D + d] *= factor;
    }
    small_gemm::gemm<T, true, kBytes>(rows, D, b, Strided<T>{s, b, 1}, v.in_row(v.p.v, pair, m * b), v_stride, acc, D);
    if (m == 0) break;
    small_gemm::gemm<T, false, kBytes>(rows, D, D, Strided<T>{walk, D, 1}, v.block(v.in(v.p.product), m, pair, D * D),
                                       D, next, D);
    std::swap(walk, next);
  }
  T* lse = v.out(v.p.lse) + pair * v.padded + c * b;
  for (int64_t r = 0; r < rows; ++r) {
    const T inv = T(1) / w.sum[r];
    T* out = v.out_row(v.p.out, pair, c * b + r);
    for (int64_t d = 0; d < D; ++d) out[d] = acc[r * D + d] * inv;
    lse[r] = w.maximum[r] + std::log(w.sum[r]);
  }
}

template <typename T>
struct BackwardScratch {
  std::vector<T> walked, scores, dp, grad, next;
  BackwardScratch(int64_t n, int64_t b, int64_t D)
      : walked(n * b * D), scores(b * b), dp(b * b), grad(b * D), next(b * D) {}
};

// Query block c's scores with key block m, s (scaled; `own`: the block's own keys, j <= i), become
// its weights P (in s) and d loss / d s (in dp, zero past the visible keys); v_m's gradient gains
// P^T dO and the gate's its part of d s.
template <int kBytes, typename T>
ROFORMER_ALWAYS_INLINE void key_block_grads(const View<T>& v, int64_t pair, int64_t c, int64_t m, int64_t rows,
                                            bool own, T* s, T* dp) {
  const int64_t b = v.b, D = v.D;
  const T* lse = v.in(v.p.lse) + pair * v.padded + c * b;
  const T* delta = v.in(v.p.delta) + pair * v.padded + c * b;
  const T* dout = v.in_row(v.p.grad_out, pair, c * b);
  const int64_t dout_stride = v.p.grad_out.token_stride;
  const int64_t keys = own ? rows : b;  // the own block's keys past its last row are past every query
  for (int64_t r = 0; r < rows; ++r) tile_grad_loop::weights_from_lse<kBytes>(s + r * b, own ? r + 1 : b, b, lse[r]);
  small_gemm::gemm<T, false, kBytes>(rows, b, D, Strided<T>{dout, dout_stride, 1},
                                     v.in(v.p.vt) + pair * D * v.padded + m * b, v.padded, dp, b);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < b; ++j) dp[r * b + j] = s[r * b + j] * (dp[r * b + j] - delta[r]);
  T* d_v = v.out_row(v.p.d_v, pair, m * b);
  if (own) {  // key block m's first gradient (query blocks before it do not see it): written
    small_gemm::gemm<T, false, kBytes>(keys, D, rows, Strided<T>{s, 1, b}, dout, dout_stride, d_v, v.p.d_v.token_stride,
                                       small_gemm::Limit::sum_from_row);
  } else {
    small_gemm::gemm<T, true, kBytes>(keys, D, rows, Strided<T>{s, 1, b}, dout, dout_stride, d_v, v.p.d_v.token_stride);
  }
  if (v.p.gate == nullptr) return;
  const T scale = static_cast<T>(v.p.scale);
  T* dg = v.out(v.p.d_gate) + pair * v.padded;
  for (int64_t r = 0; r < rows; ++r) {
    T total = 0;
    for (int64_t j = 0; j < b; ++j) {
      total += dp[r * b + j];
      dg[m * b + j] -= dp[r * b + j] * scale;
    }
    dg[c * b + r] += total * scale;
  }
}

template <int kBytes, typename T>
ROFORMER_ALWAYS_INLINE void backward_query_block(const View<T>& v, int64_t pair, int64_t c, BackwardScratch<T>& w) {
  const int64_t b = v.b, D = v.D, rows = v.rows_of(c);
  const T scale = static_cast<T>(v.p.scale);
  T *s = w.scores.data(), *dp = w.dp.data(), *grad = w.grad.data(), *next = w.next.data();
  auto walked = [&](int64_t m) { return w.walked.data() + m * b * D; };  // the rows where key block m is scored
  if (c > 0) std::copy_n(v.block(v.in(v.p.rows), c, pair, b * D), rows * D, walked(c - 1));
  for (int64_t m = c - 1; m >= 1; --m)
    small_gemm::gemm<T, false, kBytes>(rows, D, D, Strided<T>{walked(m), D, 1},
                                       v.block(v.in(v.p.product), m, pair, D * D), D, walked(m - 1), D);
  std::copy_n(v.block(v.in(v.p.own), c, pair, b * b), rows * b, s);
  scale_scores(v, pair, c, c, rows, s);
  key_block_grads<kBytes>(v, pair, c, c, rows, true, s, dp);
  T* d_own = v.block(v.out(v.p.d_own), c, pair, b * b);
  for (int64_t e = 0; e < rows * b; ++e) d_own[e] = dp[e] * scale;
  std::fill(d_own + rows * b, d_own + b * b, T(0));  // rows past the sequence's end
  for (int64_t m = 0; m < c; ++m) {
    small_gemm::gemm<T, false, kBytes>(rows, b, D, Strided<T>{walked(m), D, 1},
                                       v.block(v.in(v.p.carried_t), m, pair, D * b), b, s, b);
    scale_scores(v, pair, c, m, rows, s);
    key_block_grads<kBytes>(v, pair, c, m, rows, false, s, dp);
    for (int64_t e = 0; e < rows * b; ++e) dp[e] *= scale;  // d loss / d raw score
    // Key block m's gradients: written by the first query block after it, added to by the rest.
    small_gemm::gemm_set_or_add<T, kBytes>(c > m + 1, b, D, rows, Strided<T>{dp, 1, b}, walked(m), D,
                                           v.block(v.out(v.p.d_carried), m, pair, b * D), D);
    if (m > 0)  // walked(m - 1) = walked(m) product_m: product_m's gradient, then the walk's back through it
      small_gemm::gemm_set_or_add<T, kBytes>(c > m + 1, D, D, rows, Strided<T>{walked(m), 1, D}, grad, D,
                                             v.block(v.out(v.p.d_product), m, pair, D * D), D);
    small_gemm::gemm<T, false, kBytes>(rows, D, b, Strided<T>{dp, b, 1}, v.block(v.in(v.p.carried), m, pair, b * D), D,
                                       next, D);
    if (m > 0)
      small_gemm::gemm<T, true, kBytes>(rows, D, D, Strided<T>{grad, D, 1},
                                        v.block(v.in(v.p.product_t), m, pair, D * D), D, next, D);
    std::swap(grad, next);
  }
  T* d_rows = v.block(v.out(v.p.d_rows), c, pair, b * D);
  if (c > 0) std::copy_n(grad, rows * D, d_rows);
  std::fill(d_rows + (c > 0 ? rows * D : 0), d_rows + b * D, T(0));  // block 0's rows walk nowhere
}

template <typename T, int kBytes>
ROFORMER_ALWAYS_INLINE void forward_items(const PathBlockLaunch& p, int64_t first, int64_t last) {
  const View<T> v(p);
  ForwardScratch<T> scratch(v.b, v.D);
  for (int64_t item = first; item < last; ++item)  // the longest walks first
    forward_item<kBytes>(v, item % p.pairs, v.n - 1 - item / p.pairs, scratch);
}

template <typename T, int kBytes>
ROFORMER_ALWAYS_INLINE void backward_pairs(const PathBlockLaunch& p, int64_t first, int64_t last) {
  const View<T> v(p);
  BackwardScratch<T> scratch(v.n, v.b, v.D);
  for (int64_t pair = first; pair < last; ++pair) {
    T* delta = v.out(p.delta) + pair * v.padded;  // rowsum(d out * out)
    for (int64_t t = 0; t < v.S; ++t) {
      const T *dout = v.in_row(p.grad_out, pair, t), *out = v.in_row(p.out, pair, t);
      T sum = 0;
      for (int64_t d = 0; d < v.D; ++d) sum += dout[d] * out[d];
      delta[t] = sum;
    }
    for (int64_t c = 0; c < v.n; ++c) backward_query_block<kBytes>(v, pair, c, scratch);
    // What no query block after it reaches: the last block's keys and products, the first's product.
    const int64_t final_block = v.n - 1;
    std::fill_n(v.block(v.out(p.d_carried), final_block, pair, v.b * v.D), v.b * v.D, T(0));
    std::fill_n(v.block(v.out(p.d_product), final_block, pair, v.D * v.D), v.D * v.D, T(0));
    std::fill_n(v.block(v.out(p.d_product), 0, pair, v.D * v.D), v.D * v.D, T(0));
  }
}

ROFORMER_VECTOR_WIDTH_KERNELS(forward_kernel, PathBlockLaunch, forward_items)
ROFORMER_VECTOR_WIDTH_KERNELS(backward_kernel, PathBlockLaunch, backward_pairs)

}  // namespace path_blocks

void path_block_forward_cpu(const PathBlockLaunch& p) {
  using namespace path_blocks;
  const auto items = forward_kernel(p.dtype);
  for_each_claim(p.pairs * p.blocks, 1, [&](int64_t first, int64_t last) { items(p, first, last); });
}

void path_block_backward_cpu(const PathBlockLaunch& p) {
  using namespace path_blocks;
  const auto pairs = backward_kernel(p.dtype);
  for_each_claim(p.pairs, 1, [&](int64_t first, int64_t last) { pairs(p, first, last); });
}

}  // namespace roformer::ops
