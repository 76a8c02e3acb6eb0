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
void transpose(const T* x, int64_t rows, int64_t cols, T* out) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = x[r * cols + c];
}

// Zeroes the entries above the diagonal of x [b, b] (and the diagonal unless keep_diagonal).
template <typename T>
void keep_lower(T* x, int64_t b, bool keep_diagonal) {
  for (int64_t i = 0; i < b; ++i) std::fill(x + i * b + i + (keep_diagonal ? 1 : 0), x + (i + 1) * b, T(0));
}

template <typename T>
void subtract(T* x, const T* y, int64_t count) {  // x -= y
  for (int64_t e = 0; e < count; ++e) x[e] -= y[e];
}

template <typename T>
void negate(T* x, int64_t count) {
  for (int64_t e = 0; e < count; ++e) x[e] = -x[e];
}

// C (= or +=) A B through small_gemm, compiled per x86-64 level and for AVX-512's 64-byte vectors
// in these functions alone (each 32 x 32 product one call): the block code around them is plain
// and not inlined into every level, which kept this file compiling for minutes.
template <typename T>
using Product = void (*)(int64_t m, int64_t n, int64_t k, Strided<T> a, const T* b, T* c, bool add);
template <typename T, int kBytes>
ROFORMER_ALWAYS_INLINE void product_of(int64_t m, int64_t n, int64_t k, Strided<T> a, const T* b, T* c, bool add) {
  if (add) {
    small_gemm::gemm<T, true, kBytes>(m, n, k, a, b, n, c, n);
  } else {
    small_gemm::gemm<T, false, kBytes>(m, n, k, a, b, n, c, n);
  }
}
ROFORMER_CLONES void product_f32(int64_t m, int64_t n, int64_t k, Strided<float> a, const float* b, float* c,
                                 bool add) {
  product_of<float, 32>(m, n, k, a, b, c, add);
}
ROFORMER_WIDE_TARGET void product_f32_wide(int64_t m, int64_t n, int64_t k, Strided<float> a, const float* b, float* c,
                                           bool add) {
  product_of<float, ROFORMER_WIDE_VECTORS ? 64 : 32>(m, n, k, a, b, c, add);
}
void product_f64(int64_t m, int64_t n, int64_t k, Strided<double> a, const double* b, double* c, bool add) {
  product_of<double, 32>(m, n, k, a, b, c, add);
}
Product<float> pick_product(float*) {
  return cpu_vector_bytes() == 64 ? product_f32_wide : product_f32;
}
Product<double> pick_product(double*) {
  return product_f64;
}

// One block's tensors and scratch; every matrix [b, b], [b, D] or [D, D] row-major.
template <typename T>
struct Block {
  const PathInputsLaunch& p;
  int64_t b, D;
  Product<T> product = pick_product(static_cast<T*>(nullptr));
  std::vector<T> Q, K, W, beta, Wt, Kt, L, tr, R, U, V, X, A, bb, bD, DD, Rt, Tt;
  explicit Block(const PathInputsLaunch& launch)
      : p(launch),
        b(launch.block),
        D(launch.head_dim),
        Q(b * D),
        K(b * D),
        W(b * D),
        beta(b),
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
  void mul(int64_t m, int64_t n, int64_t k, const T* a, bool ta, const T* b_, T* c) const {
    product(m, n, k, ta ? Strided<T>{a, 1, m} : Strided<T>{a, k, 1}, b_, c, kAdd);
  }
  // The tokens of block c that exist (the last block may be short).
  int64_t tokens(int64_t c) const { return std::min(b, p.length - c * b); }
  // Block c's q, k, w rows and betas into Q, K, W and beta, zeros past the sequence's end.
  void load(int64_t pair, int64_t c) {
    const int64_t n = tokens(c);
    for (int64_t r = 0; r < n; ++r) {
      std::copy_n(p.q.template row<const T>(pair, c * b + r), D, Q.data() + r * D);
      std::copy_n(p.k.template row<const T>(pair, c * b + r), D, K.data() + r * D);
      const T* state = p.state.template row<const T>(pair, c * b + r);
      std::copy_n(state, D, W.data() + r * D);
      beta[r] = state[D];
    }
    std::fill(Q.begin() + n * D, Q.end(), T(0));
    std::fill(K.begin() + n * D, K.end(), T(0));
    std::fill(W.begin() + n * D, W.end(), T(0));
    std::fill(beta.begin() + n, beta.end(), T(0));
  }
  template <typename P>
  P* block(P* x, int64_t pair, int64_t c, int64_t size) const {
    return x + (c * p.pairs + pair) * size;
  }

  // M = I + diag(beta) L unit lower: T = M^-1 diag(beta) row by row (T lower triangular).
  void solve_transform(const T* beta) {
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
  void common(const T* saved_transform, const T* saved_reach) {
    transpose(W.data(), b, D, Wt.data());
    transpose(K.data(), b, D, Kt.data());
    mul(b, b, D, W.data(), false, Wt.data(), L.data());
    keep_lower(L.data(), b, false);
    if (saved_transform != nullptr) {
      std::copy_n(saved_transform, b * b, tr.data());
      std::copy_n(saved_reach, b * b, R.data());
    } else {
      solve_transform(beta.data());
      mul(b, b, D, W.data(), false, Kt.data(), R.data());
      keep_lower(R.data(), b, false);
    }
    mul(b, b, b, tr.data(), false, R.data(), U.data());
    mul(b, D, b, tr.data(), false, W.data(), V.data());
    mul(b, b, D, Q.data(), false, Wt.data(), X.data());
    keep_lower(X.data(), b, true);
    mul(b, b, b, X.data(), false, tr.data(), A.data());
  }

  void forward(int64_t pair, int64_t c) {
    load(pair, c);
    common(nullptr, nullptr);
    std::copy_n(tr.data(), b * b, block(static_cast<T*>(p.transform), pair, c, b * b));
    std::copy_n(R.data(), b * b, block(static_cast<T*>(p.reach), pair, c, b * b));
    T* carried = block(static_cast<T*>(p.carried), pair, c, b * D);
    mul(b, D, b, U.data(), true, W.data(), bD.data());  // U^T W
    for (int64_t e = 0; e < b * D; ++e) carried[e] = K[e] - bD[e];
    T* product = block(static_cast<T*>(p.product), pair, c, D * D);
    mul(D, D, b, W.data(), true, V.data(), product);  // W^T V
    negate(product, D * D);
    for (int64_t d = 0; d < D; ++d) product[d * D + d] += T(1);
    T* own = block(static_cast<T*>(p.own), pair, c, b * b);
    mul(b, b, D, Q.data(), false, Kt.data(), own);
    mul(b, b, b, A.data(), false, R.data(), bb.data());
    subtract(own, bb.data(), b * b);
    keep_lower(own, b, true);
    T* rows = block(static_cast<T*>(p.rows), pair, c, b * D);
    mul(b, D, b, A.data(), false, W.data(), bD.data());
    for (int64_t e = 0; e < b * D; ++e) rows[e] = Q[e] - bD[e];
  }
};

// The scratch of the backward: gradients of Q, K, W, A, X, T, R, U, V and the masked d own.
template <typename T>
struct Grads {
  std::vector<T> dq, dk, dw, da, dx, dt, dr, du, dv, om, dct, dpt, y, d_beta;
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
        y(b * b),
        d_beta(b) {}
};

// The query side's lines backwards: rows = Q - A W, own = tril(Q K^T - A R), A = X T and
// X = tril(Q W^T); sets dq, dk, dw, dt, dr.
template <typename T>
void query_side_grads(Block<T>& k, Grads<T>& g, const T* Q, const T* K, const T* W, const T* d_own, const T* d_rows) {
  const int64_t b = k.b, D = k.D;
  std::copy_n(d_rows, b * D, g.dq.data());
  k.mul(b, b, D, d_rows, false, k.Wt.data(), g.da.data());
  negate(g.da.data(), b * b);
  k.mul(b, D, b, k.A.data(), true, d_rows, g.dw.data());
  negate(g.dw.data(), b * D);
  std::copy_n(d_own, b * b, g.om.data());  // own's gradient where own is kept
  keep_lower(g.om.data(), b, true);
  k.template mul<true>(b, D, b, g.om.data(), false, K, g.dq.data());
  k.mul(b, D, b, g.om.data(), true, Q, g.dk.data());
  k.mul(b, b, b, g.om.data(), false, k.Rt.data(), k.bb.data());
  subtract(g.da.data(), k.bb.data(), b * b);
  k.mul(b, b, b, k.A.data(), true, g.om.data(), g.dr.data());
  negate(g.dr.data(), b * b);
  k.mul(b, b, b, g.da.data(), false, k.Tt.data(), g.dx.data());
  keep_lower(g.dx.data(), b, true);
  k.mul(b, b, b, k.X.data(), true, g.da.data(), g.dt.data());
  k.template mul<true>(b, D, b, g.dx.data(), false, W, g.dq.data());
  k.template mul<true>(b, D, b, g.dx.data(), true, Q, g.dw.data());
}

// The key side's lines backwards: product = I - W^T V, V = T W, carried = K - U^T W, U = T R and
// R = strictly_lower(W K^T); adds to dk, dw, dt, dr.
template <typename T>
void key_side_grads(Block<T>& k, Grads<T>& g, const T* K, const T* W, const T* d_carried, const T* d_product) {
  const int64_t b = k.b, D = k.D;
  k.mul(b, D, D, W, false, d_product, g.dv.data());
  negate(g.dv.data(), b * D);
  transpose(d_product, D, D, g.dpt.data());
  k.mul(b, D, D, k.V.data(), false, g.dpt.data(), k.bD.data());
  subtract(g.dw.data(), k.bD.data(), b * D);
  k.template mul<true>(b, b, D, g.dv.data(), false, k.Wt.data(), g.dt.data());
  k.template mul<true>(b, D, b, k.tr.data(), true, g.dv.data(), g.dw.data());
  for (int64_t e = 0; e < b * D; ++e) g.dk[e] += d_carried[e];
  transpose(d_carried, b, D, g.dct.data());
  k.mul(b, b, D, W, false, g.dct.data(), g.du.data());
  negate(g.du.data(), b * b);
  k.mul(b, D, b, k.U.data(), false, d_carried, k.bD.data());
  subtract(g.dw.data(), k.bD.data(), b * D);
  k.template mul<true>(b, b, b, g.du.data(), false, k.Rt.data(), g.dt.data());
  k.template mul<true>(b, b, b, k.tr.data(), true, g.du.data(), g.dr.data());
  keep_lower(g.dr.data(), b, false);  // R's gradient where R is kept
  k.template mul<true>(b, D, b, g.dr.data(), false, K, g.dw.data());
  k.template mul<true>(b, D, b, g.dr.data(), true, W, g.dk.data());
}

// T = M^-1 diag(beta) and L = strictly_lower(W W^T) backwards: Y = M^-T dT by back substitution
// (M_ij = beta_i L_ij, i > j), d beta = diag(Y) + (dM . L) by row, dM = -Y T^T, dL = diag(beta) dM;
// writes d beta, adds (dL + dL^T) W to dw.
template <typename T>
void transform_grads(Block<T>& k, Grads<T>& g, const T* W, const T* beta, T* d_beta) {
  const int64_t b = k.b;
  T* y = g.y.data();
  for (int64_t i = b - 1; i >= 0; --i) {
    T* row = y + i * b;
    std::copy_n(g.dt.data() + i * b, b, row);
    for (int64_t j = i + 1; j < b; ++j) {
      const T m = beta[j] * k.L[j * b + i];
      for (int64_t e = 0; e < b; ++e) row[e] -= m * y[j * b + e];
    }
  }
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
  k.template mul<true>(b, k.D, b, dl, false, W, g.dw.data());
}

template <typename T>
void backward_block(Block<T>& k, Grads<T>& g, int64_t pair, int64_t c) {
  const PathInputsLaunch& p = k.p;
  const int64_t b = k.b, D = k.D;
  k.load(pair, c);
  const T *W = k.W.data(), *K = k.K.data(), *Q = k.Q.data();
  k.common(k.block(static_cast<const T*>(p.transform), pair, c, b * b),
           k.block(static_cast<const T*>(p.reach), pair, c, b * b));
  transpose(k.R.data(), b, b, k.Rt.data());
  transpose(k.tr.data(), b, b, k.Tt.data());
  query_side_grads(k, g, Q, K, W, k.block(static_cast<const T*>(p.d_own), pair, c, b * b),
                   k.block(static_cast<const T*>(p.d_rows), pair, c, b * D));
  key_side_grads(k, g, K, W, k.block(static_cast<const T*>(p.d_carried), pair, c, b * D),
                 k.block(static_cast<const T*>(p.d_product), pair, c, D * D));
  transform_grads(k, g, W, k.beta.data(), g.d_beta.data());
  for (int64_t r = 0; r < k.tokens(c); ++r) {  // the rows of tokens that exist
    std::copy_n(g.dq.data() + r * D, D, p.d_q.template row<T>(pair, c * b + r));
    std::copy_n(g.dk.data() + r * D, D, p.d_k.template row<T>(pair, c * b + r));
    T* d_state = p.d_state.template row<T>(pair, c * b + r);
    std::copy_n(g.dw.data() + r * D, D, d_state);
    d_state[D] = g.d_beta[r];
    std::fill(d_state + D + 1, d_state + p.state_width, T(0));
  }
}

template <typename T>
void forward_items(const PathInputsLaunch& p, int64_t first, int64_t last) {
  Block<T> k(p);
  for (int64_t item = first; item < last; ++item) k.forward(item / p.blocks, item % p.blocks);
}

template <typename T>
void backward_items(const PathInputsLaunch& p, int64_t first, int64_t last) {
  Block<T> k(p);
  Grads<T> g(p.block, p.head_dim);
  for (int64_t item = first; item < last; ++item) backward_block(k, g, item / p.blocks, item % p.blocks);
}

using Items = void (*)(const PathInputsLaunch&, int64_t, int64_t);

Items pick(const PathInputsLaunch& p, Items f64, Items f32) {
  return p.dtype == KernelDType::f64 ? f64 : f32;
}

}  // namespace path_inputs

void path_inputs_forward_cpu(const PathInputsLaunch& p) {
  using namespace path_inputs;
  const Items items = pick(p, forward_items<double>, forward_items<float>);
  for_each_claim(p.pairs * p.blocks, 4, [&](int64_t first, int64_t last) { items(p, first, last); });
}

void path_inputs_backward_cpu(const PathInputsLaunch& p) {
  using namespace path_inputs;
  const Items items = pick(p, backward_items<double>, backward_items<float>);
  for_each_claim(p.pairs * p.blocks, 4, [&](int64_t first, int64_t last) { items(p, first, last); });
}

}  // namespace roformer::ops
