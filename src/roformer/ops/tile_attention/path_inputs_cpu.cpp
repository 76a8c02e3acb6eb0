// PaTH's blocks formed per (pair, block) on the CPU (see path_blocks.h): what path_key_blocks and
// path_query_blocks form with batched LibTorch products, here with each block's 32 x 32 products in
// registers (small_gemm) and its UT transform by substitution, and their backward by hand.
// Per block, W, K, Q its w, keys and queries [b, D] and beta its beta:
//   L = strictly_lower(W W^T), M = I + diag(beta) L, T = M^-1 diag(beta), R = strictly_lower(W K^T),
//   carried = K - (T R)^T W, product = I - W^T (T W),
//   X = tril(Q W^T), A = X T, own = tril(Q K^T - A R), rows = Q - A W.
// The backward runs the chain rule through the same lines in reverse, T's through
// Y = M^-T dT (d diag(beta) = Y's diagonal, dM = -Y T^T).
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <vector>

#include "roformer/ops/common/cpu_kernel_support.h"
#include "roformer/ops/common/cpu_vectors.h"
#include "roformer/ops/common/small_gemm.h"
#include "roformer/ops/tile_attention/path_blocks_kernels.h"

namespace roformer::ops {
namespace path_inputs {

using small_gemm::Strided;

template <typename T>
ROFORMER_ALWAYS_INLINE void transpose(const T* x, int64_t rows, int64_t cols, T* out) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = x[r * cols + c];
}

// Zeroes the entries above the diagonal of x [b, b] (and the diagonal unless keep_diagonal).
template <typename T>
ROFORMER_ALWAYS_INLINE void keep_lower(T* x, int64_t b, bool keep_diagonal) {
  for (int64_t i = 0; i < b; ++i) std::fill(x + i * b + i + (keep_diagonal ? 1 : 0), x + (i + 1) * b, T(0));
}

template <typename T>
ROFORMER_ALWAYS_INLINE void subtract(T* x, const T* y, int64_t count) {  // x -= y
  for (int64_t e = 0; e < count; ++e) x[e] -= y[e];
}

template <typename T>
ROFORMER_ALWAYS_INLINE void negate(T* x, int64_t count) {
  for (int64_t e = 0; e < count; ++e) x[e] = -x[e];
}

// One block's tensors and scratch; every matrix [b, b], [b, D] or [D, D] row-major.
template <typename T, int kBytes>
struct Block {
  const PathInputsLaunch& p;
  int64_t b, D, padded;
  std::vector<T> Wt, Kt, L, tr, R, U, V, X, A, bb, bD, DD, Rt, Tt;
  explicit Block(const PathInputsLaunch& launch)
      : p(launch),
        b(launch.block),
        D(launch.head_dim),
        padded(launch.blocks * launch.block),
        Wt(b * D),
        Kt(b * D),
        L(b * b),
        tr(b * b),
        R(b * b),
        U(b * b),
        V(b * D),
        X(b * b),
        A(b * b),
        bb(b * b),
        bD(b * D),
        DD(D * D),
        Rt(b * b),
        Tt(b * b) {}

  // C (= or +=) A B for row-major operands; `ta`: A read transposed.
  template <bool kAdd = false>
  ROFORMER_ALWAYS_INLINE void mul(int64_t m, int64_t n, int64_t k, const T* a, bool ta, const T* b_, T* c) const {
    const Strided<T> av = ta ? Strided<T>{a, 1, m} : Strided<T>{a, k, 1};
    small_gemm::gemm<T, kAdd, kBytes>(m, n, k, av, b_, n, c, n);
  }
  ROFORMER_ALWAYS_INLINE const T* token_rows(const void* x, int64_t pair, int64_t c) const {
    return static_cast<const T*>(x) + (pair * padded + c * b) * D;
  }
  template <typename P>
  ROFORMER_ALWAYS_INLINE P* block(P* x, int64_t pair, int64_t c, int64_t size) const {
    return x + (c * p.pairs + pair) * size;
  }

  // M = I + diag(beta) L unit lower: T = M^-1 diag(beta) row by row (T lower triangular).
  ROFORMER_ALWAYS_INLINE void solve_transform(const T* beta) {
    std::fill(tr.begin(), tr.end(), T(0));
    for (int64_t i = 0; i < b; ++i) {
      T* row = tr.data() + i * b;
      row[i] = beta[i];
      for (int64_t j = 0; j < i; ++j) {
        const T m = beta[i] * L[i * b + j];
        const T* earlier = tr.data() + j * b;
        for (int64_t c = 0; c <= j; ++c) row[c] -= m * earlier[c];
      }
    }
  }

  // What both passes need: W^T, K^T, L, R (T from `saved` or solved) and U = T R, V = T W,
  // X = tril(Q W^T), A = X T.
  ROFORMER_ALWAYS_INLINE void common(const T* W, const T* K, const T* Q, const T* beta, const T* saved_transform,
                                     const T* saved_reach) {
    transpose(W, b, D, Wt.data());
    transpose(K, b, D, Kt.data());
    mul(b, b, D, W, false, Wt.data(), L.data());
    keep_lower(L.data(), b, false);
    if (saved_transform != nullptr) {
      std::copy_n(saved_transform, b * b, tr.data());
      std::copy_n(saved_reach, b * b, R.data());
    } else {
      solve_transform(beta);
      mul(b, b, D, W, false, Kt.data(), R.data());
      keep_lower(R.data(), b, false);
    }
    mul(b, b, b, tr.data(), false, R.data(), U.data());
    mul(b, D, b, tr.data(), false, W, V.data());
    mul(b, b, D, Q, false, Wt.data(), X.data());
    keep_lower(X.data(), b, true);
    mul(b, b, b, X.data(), false, tr.data(), A.data());
  }

  ROFORMER_ALWAYS_INLINE void forward(int64_t pair, int64_t c) {
    const T *W = token_rows(p.w, pair, c), *K = token_rows(p.k, pair, c), *Q = token_rows(p.q, pair, c);
    const T* beta = static_cast<const T*>(p.beta) + pair * padded + c * b;
    common(W, K, Q, beta, nullptr, nullptr);
    std::copy_n(tr.data(), b * b, block(static_cast<T*>(p.transform), pair, c, b * b));
    std::copy_n(R.data(), b * b, block(static_cast<T*>(p.reach), pair, c, b * b));
    T* carried = block(static_cast<T*>(p.carried), pair, c, b * D);
    mul(b, D, b, U.data(), true, W, bD.data());  // U^T W
    for (int64_t e = 0; e < b * D; ++e) carried[e] = K[e] - bD[e];
    T* product = block(static_cast<T*>(p.product), pair, c, D * D);
    mul(D, D, b, W, true, V.data(), product);  // W^T V
    negate(product, D * D);
    for (int64_t d = 0; d < D; ++d) product[d * D + d] += T(1);
    T* own = block(static_cast<T*>(p.own), pair, c, b * b);
    mul(b, b, D, Q, false, Kt.data(), own);
    mul(b, b, b, A.data(), false, R.data(), bb.data());
    subtract(own, bb.data(), b * b);
    keep_lower(own, b, true);
    T* rows = block(static_cast<T*>(p.rows), pair, c, b * D);
    mul(b, D, b, A.data(), false, W, bD.data());
    for (int64_t e = 0; e < b * D; ++e) rows[e] = Q[e] - bD[e];
  }
};

// The scratch of the backward: gradients of Q, K, W, A, X, T, R, U, V and the masked d own.
template <typename T>
struct Grads {
  std::vector<T> dq, dk, dw, da, dx, dt, dr, du, dv, om, dct, dpt, y;
  Grads(int64_t b, int64_t D)
      : dq(b * D),
        dk(b * D),
        dw(b * D),
        da(b * b),
        dx(b * b),
        dt(b * b),
        dr(b * b),
        du(b * b),
        dv(b * D),
        om(b * b),
        dct(b * D),
        dpt(D * D),
        y(b * b) {}
};

template <typename T, int kBytes>
ROFORMER_ALWAYS_INLINE void backward_block(Block<T, kBytes>& k, Grads<T>& g, int64_t pair, int64_t c) {
  const PathInputsLaunch& p = k.p;
  const int64_t b = k.b, D = k.D;
  const T *W = k.token_rows(p.w, pair, c), *K = k.token_rows(p.k, pair, c), *Q = k.token_rows(p.q, pair, c);
  const T* beta = static_cast<const T*>(p.beta) + pair * k.padded + c * b;
  k.common(W, K, Q, beta, k.block(static_cast<const T*>(p.transform), pair, c, b * b),
           k.block(static_cast<const T*>(p.reach), pair, c, b * b));
  const T* d_rows = k.block(static_cast<const T*>(p.d_rows), pair, c, b * D);
  const T* d_carried = k.block(static_cast<const T*>(p.d_carried), pair, c, b * D);
  const T* d_product = k.block(static_cast<const T*>(p.d_product), pair, c, D * D);
  transpose(k.R.data(), b, b, k.Rt.data());
  transpose(k.tr.data(), b, b, k.Tt.data());
  // rows = Q - A W
  std::copy_n(d_rows, b * D, g.dq.data());
  k.mul(b, b, D, d_rows, false, k.Wt.data(), g.da.data());
  negate(g.da.data(), b * b);
  k.mul(b, D, b, k.A.data(), true, d_rows, g.dw.data());
  negate(g.dw.data(), b * D);
  // own = tril(Q K^T - A R)
  std::copy_n(k.block(static_cast<const T*>(p.d_own), pair, c, b * b), b * b, g.om.data());
  keep_lower(g.om.data(), b, true);
  k.template mul<true>(b, D, b, g.om.data(), false, K, g.dq.data());
  k.mul(b, D, b, g.om.data(), true, Q, g.dk.data());
  k.mul(b, b, b, g.om.data(), false, k.Rt.data(), k.bb.data());
  subtract(g.da.data(), k.bb.data(), b * b);
  k.mul(b, b, b, k.A.data(), true, g.om.data(), g.dr.data());
  negate(g.dr.data(), b * b);
  // A = X T, X = tril(Q W^T)
  k.mul(b, b, b, g.da.data(), false, k.Tt.data(), g.dx.data());
  keep_lower(g.dx.data(), b, true);
  k.mul(b, b, b, k.X.data(), true, g.da.data(), g.dt.data());
  k.template mul<true>(b, D, b, g.dx.data(), false, W, g.dq.data());
  k.template mul<true>(b, D, b, g.dx.data(), true, Q, g.dw.data());
  // product = I - W^T V, V = T W
  k.mul(b, D, D, W, false, d_product, g.dv.data());
  negate(g.dv.data(), b * D);
  transpose(d_product, D, D, g.dpt.data());
  k.mul(b, D, D, k.V.data(), false, g.dpt.data(), k.bD.data());
  subtract(g.dw.data(), k.bD.data(), b * D);
  k.template mul<true>(b, b, D, g.dv.data(), false, k.Wt.data(), g.dt.data());
  k.template mul<true>(b, D, b, k.tr.data(), true, g.dv.data(), g.dw.data());
  // carried = K - U^T W, U = T R
  for (int64_t e = 0; e < b * D; ++e) g.dk[e] += d_carried[e];
  transpose(d_carried, b, D, g.dct.data());
  k.mul(b, b, D, W, false, g.dct.data(), g.du.data());
  negate(g.du.data(), b * b);
  k.mul(b, D, b, k.U.data(), false, d_carried, k.bD.data());
  subtract(g.dw.data(), k.bD.data(), b * D);
  k.template mul<true>(b, b, b, g.du.data(), false, k.Rt.data(), g.dt.data());
  k.template mul<true>(b, b, b, k.tr.data(), true, g.du.data(), g.dr.data());
  // R = strictly_lower(W K^T)
  keep_lower(g.dr.data(), b, false);
  k.template mul<true>(b, D, b, g.dr.data(), false, K, g.dw.data());
  k.template mul<true>(b, D, b, g.dr.data(), true, W, g.dk.data());
  // T = M^-1 diag(beta): Y = M^-T dT by back substitution, M_ij = beta_i L_ij (i > j)
  T* y = g.y.data();
  for (int64_t i = b - 1; i >= 0; --i) {
    T* row = y + i * b;
    std::copy_n(g.dt.data() + i * b, b, row);
    for (int64_t j = i + 1; j < b; ++j) {
      const T m = beta[j] * k.L[j * b + i];
      for (int64_t e = 0; e < b; ++e) row[e] -= m * y[j * b + e];
    }
  }
  T* d_beta = static_cast<T*>(p.d_beta) + pair * k.padded + c * b;
  k.mul(b, b, b, y, false, k.Tt.data(), k.bb.data());  // -dM = Y T^T
  T* dl = g.om.data();                                 // d L, strictly lower
  for (int64_t i = 0; i < b; ++i) {
    T from_m = 0;
    for (int64_t j = 0; j < b; ++j) {
      const T dm = j < i ? -k.bb[i * b + j] : T(0);
      from_m += dm * k.L[i * b + j];
      dl[i * b + j] = beta[i] * dm;
    }
    d_beta[i] = y[i * b + i] + from_m;
  }
  for (int64_t i = 0; i < b; ++i)  // L = strictly_lower(W W^T): dW += (dL + dL^T) W
    for (int64_t j = 0; j < i; ++j) dl[j * b + i] = dl[i * b + j];
  k.template mul<true>(b, D, b, dl, false, W, g.dw.data());
  auto put = [&](void* base, const std::vector<T>& from) {
    std::copy_n(from.data(), b * D, static_cast<T*>(base) + (pair * k.padded + c * b) * D);
  };
  put(p.d_q, g.dq);
  put(p.d_k, g.dk);
  put(p.d_w, g.dw);
}

template <typename T, int kBytes>
ROFORMER_ALWAYS_INLINE void forward_items(const PathInputsLaunch& p, int64_t first, int64_t last) {
  Block<T, kBytes> k(p);
  for (int64_t item = first; item < last; ++item) k.forward(item / p.blocks, item % p.blocks);
}

template <typename T, int kBytes>
ROFORMER_ALWAYS_INLINE void backward_items(const PathInputsLaunch& p, int64_t first, int64_t last) {
  Block<T, kBytes> k(p);
  Grads<T> g(p.block, p.head_dim);
  for (int64_t item = first; item < last; ++item) backward_block(k, g, item / p.blocks, item % p.blocks);
}

using Items = void (*)(const PathInputsLaunch&, int64_t, int64_t);
ROFORMER_CLONES void forward_f32(const PathInputsLaunch& p, int64_t first, int64_t last) {
  forward_items<float, 32>(p, first, last);
}
ROFORMER_WIDE_TARGET void forward_f32_wide(const PathInputsLaunch& p, int64_t first, int64_t last) {
  forward_items<float, ROFORMER_WIDE_VECTORS ? 64 : 32>(p, first, last);
}
void forward_f64(const PathInputsLaunch& p, int64_t first, int64_t last) {
  forward_items<double, 32>(p, first, last);
}
ROFORMER_CLONES void backward_f32(const PathInputsLaunch& p, int64_t first, int64_t last) {
  backward_items<float, 32>(p, first, last);
}
ROFORMER_WIDE_TARGET void backward_f32_wide(const PathInputsLaunch& p, int64_t first, int64_t last) {
  backward_items<float, ROFORMER_WIDE_VECTORS ? 64 : 32>(p, first, last);
}
void backward_f64(const PathInputsLaunch& p, int64_t first, int64_t last) {
  backward_items<double, 32>(p, first, last);
}

Items pick(const PathInputsLaunch& p, Items f64, Items f32, Items f32_wide) {
  if (p.dtype == KernelDType::f64) return f64;
  return cpu_vector_bytes() == 64 ? f32_wide : f32;
}

}  // namespace path_inputs

void path_inputs_forward_cpu(const PathInputsLaunch& p) {
  using namespace path_inputs;
  const Items items = pick(p, forward_f64, forward_f32, forward_f32_wide);
  for_each_claim(p.pairs * p.blocks, 4, [&](int64_t first, int64_t last) { items(p, first, last); });
}

void path_inputs_backward_cpu(const PathInputsLaunch& p) {
  using namespace path_inputs;
  const Items items = pick(p, backward_f64, backward_f32, backward_f32_wide);
  for_each_claim(p.pairs * p.blocks, 4, [&](int64_t first, int64_t last) { items(p, first, last); });
}

}  // namespace roformer::ops
