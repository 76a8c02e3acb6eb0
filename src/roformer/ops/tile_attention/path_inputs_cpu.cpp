// PaTH's blocks formed per (pair, block) on the CPU (see path_blocks.h): what path_key_blocks and
// path_query_blocks form with batched LibTorch products, here with each block's 32 x 32 products in
// registers (small_gemm) and its UT transform by substitution, and their backward by hand.
// Per block, W, K, Q its w, keys and queries [b, D] and beta its beta:
//   L = strictly_lower(W W^T), M = I + diag(beta) L, T = M^-1 diag(beta), R = strictly_lower(W K^T),
//   U = T R, V = T W, X = tril(Q W^T),
//   carried = K - U^T W, product = I - W^T V, own = tril(Q K^T - X U), rows = Q - X V.
// The forward keeps T, R, L, X, U and V; the backward runs the chain rule through the same lines in
// reverse from them (20 products, none formed again), T's through Y = M^-T dT (d diag(beta) =
// Y's diagonal, dM = -Y T^T).
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <cstring>
#include <vector>

#include "roformer/ops/common/cpu_kernel_support.h"
#include "roformer/ops/common/cpu_vectors.h"
#include "roformer/ops/common/small_gemm.h"
#include "roformer/ops/tile_attention/path_blocks_kernels.h"

namespace roformer::ops {
namespace path_inputs {

using small_gemm::Limit;
using small_gemm::Strided;

// x [rows, cols] -> out [cols, rows] in 32-byte tiles (8 x 8 floats, 4 x 4 doubles) through vector
// registers; rows and cols multiples of 8 (the blocks' b and D are).
using F8 = float __attribute__((vector_size(32)));
using I8 = int32_t __attribute__((vector_size(32)));
using D4 = double __attribute__((vector_size(32)));
using L4 = int64_t __attribute__((vector_size(32)));

template <typename V, typename T>
ROFORMER_ALWAYS_INLINE V load_vector(const T* x) {
  V v;
  std::memcpy(&v, x, sizeof(V));
  return v;
}
template <typename V, typename T>
ROFORMER_ALWAYS_INLINE void store_vector(T* x, const V& v) {
  std::memcpy(x, &v, sizeof(V));
}

ROFORMER_ALWAYS_INLINE void transpose_tile(const float* x, int64_t ldx, float* out, int64_t ldo) {
  F8 r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) r[i] = load_vector<F8>(x + i * ldx);
  for (int i = 0; i < 8; i += 2) {  // pairs of rows interleaved: t0 = (x00 x10 x01 x11 x04 x14 x05 x15)
    t[i] = __builtin_shuffle(r[i], r[i + 1], I8{0, 8, 1, 9, 4, 12, 5, 13});
    t[i + 1] = __builtin_shuffle(r[i], r[i + 1], I8{2, 10, 3, 11, 6, 14, 7, 15});
  }
  for (int i = 0; i < 8; i += 4) {  // fours of rows: u0 = (x00 x10 x20 x30 x04 x14 x24 x34)
    u[i] = __builtin_shuffle(t[i], t[i + 2], I8{0, 1, 8, 9, 4, 5, 12, 13});
    u[i + 1] = __builtin_shuffle(t[i], t[i + 2], I8{2, 3, 10, 11, 6, 7, 14, 15});
    u[i + 2] = __builtin_shuffle(t[i + 1], t[i + 3], I8{0, 1, 8, 9, 4, 5, 12, 13});
    u[i + 3] = __builtin_shuffle(t[i + 1], t[i + 3], I8{2, 3, 10, 11, 6, 7, 14, 15});
  }
  for (int i = 0; i < 4; ++i) {  // the halves joined: columns i and i + 4
    store_vector(out + i * ldo, __builtin_shuffle(u[i], u[i + 4], I8{0, 1, 2, 3, 8, 9, 10, 11}));
    store_vector(out + (i + 4) * ldo, __builtin_shuffle(u[i], u[i + 4], I8{4, 5, 6, 7, 12, 13, 14, 15}));
  }
}

ROFORMER_ALWAYS_INLINE void transpose_tile(const double* x, int64_t ldx, double* out, int64_t ldo) {
  D4 r[4];
  for (int i = 0; i < 4; ++i) r[i] = load_vector<D4>(x + i * ldx);
  const D4 t0 = __builtin_shuffle(r[0], r[1], L4{0, 4, 2, 6}), t1 = __builtin_shuffle(r[0], r[1], L4{1, 5, 3, 7});
  const D4 t2 = __builtin_shuffle(r[2], r[3], L4{0, 4, 2, 6}), t3 = __builtin_shuffle(r[2], r[3], L4{1, 5, 3, 7});
  store_vector(out, __builtin_shuffle(t0, t2, L4{0, 1, 4, 5}));
  store_vector(out + ldo, __builtin_shuffle(t1, t3, L4{0, 1, 4, 5}));
  store_vector(out + 2 * ldo, __builtin_shuffle(t0, t2, L4{2, 3, 6, 7}));
  store_vector(out + 3 * ldo, __builtin_shuffle(t1, t3, L4{2, 3, 6, 7}));
}

template <typename T>
ROFORMER_ALWAYS_INLINE void transpose(const T* x, int64_t rows, int64_t cols, T* out) {
  constexpr int64_t kTile = 32 / sizeof(T);
  for (int64_t r = 0; r < rows; r += kTile)
    for (int64_t c = 0; c < cols; c += kTile) transpose_tile(x + r * cols + c, cols, out + c * rows + r, rows);
}

// Element loops for a block's rows of 32-128 bytes: inlined and vectorized where a library call
// (what std::copy_n and std::fill become, and what the entry points' optimize attribute keeps
// these loops from becoming) costs as much as the copy.
template <typename T>
void copy_elements(const T* from, int64_t count, T* to) {
  for (int64_t e = 0; e < count; ++e) to[e] = from[e];
}
template <typename T>
void zero_elements(T* x, int64_t count) {
  for (int64_t e = 0; e < count; ++e) x[e] = T(0);
}

// Zeroes the entries above the diagonal of x [b, b] (and the diagonal unless keep_diagonal).
template <typename T>
void keep_lower(T* x, int64_t b, bool keep_diagonal) {
  for (int64_t i = 0; i < b; ++i) {
    const int64_t kept = i + (keep_diagonal ? 1 : 0);
    for (int64_t j = 0; j < b; ++j) x[i * b + j] = j < kept ? x[i * b + j] : T(0);
  }
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
// in these functions alone (each 32 x 32 product one call): the block code around them is compiled
// per level too (the entry points below) but calls them rather than inlining them, since inlined
// into every level they kept this file compiling for minutes.
template <typename T>
using Product = void (*)(int64_t m, int64_t n, int64_t k, Strided<T> a, const T* b, T* c, bool add, Limit limit);
ROFORMER_CLONES void product_f32(int64_t m, int64_t n, int64_t k, Strided<float> a, const float* b, float* c, bool add,
                                 Limit limit) {
  small_gemm::gemm_set_or_add<float, 32>(add, m, n, k, a, b, n, c, n, limit);
}
ROFORMER_WIDE_TARGET void product_f32_wide(int64_t m, int64_t n, int64_t k, Strided<float> a, const float* b, float* c,
                                           bool add, Limit limit) {
  small_gemm::gemm_set_or_add<float, ROFORMER_WIDE_VECTORS ? 64 : 32>(add, m, n, k, a, b, n, c, n, limit);
}
void product_f64(int64_t m, int64_t n, int64_t k, Strided<double> a, const double* b, double* c, bool add,
                 Limit limit) {
  small_gemm::gemm_set_or_add<double, 32>(add, m, n, k, a, b, n, c, n, limit);
}
Product<float> pick_product(float*) {
  return cpu_vector_bytes() == 64 ? product_f32_wide : product_f32;
}
Product<double> pick_product(double*) {
  return product_f64;
}

// Block (pair, c)'s row of `saved` ([n, pairs, path_inputs_saved_size(b, D)]): what its forward formed
// for its backward, T, R, L, X, U ([b, b] each) and V ([b, D]). P: T or const T.
template <typename P>
struct SavedBlock {
  P *tr, *R, *L, *X, *U, *V;
  SavedBlock(P* row, int64_t b)
      : tr(row), R(row + b * b), L(row + 2 * b * b), X(row + 3 * b * b), U(row + 4 * b * b), V(row + 5 * b * b) {}
};

// One block's inputs and scratch; every matrix [b, b], [b, D] or [D, D] row-major.
template <typename T>
struct Block {
  const PathInputsLaunch& p;
  int64_t b, D;
  int64_t saved_size = path_inputs_saved_size(b, D);
  Product<T> product = pick_product(static_cast<T*>(nullptr));
  std::vector<T> Q, K, W, beta, Wt, Kt, bb, bD;
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
        bb(b * b),
        bD(b * D) {}

  // C (= or +=) A B for row-major operands; `ta`: A read transposed. A square A that is lower
  // triangular as read (zero past the diagonal: Limit::sum_to_row_end) or upper (zero before it:
  // sum_from_row) sums only where it can be nonzero, by small_gemm's tiles of rows.
  template <bool kAdd = false>
  void mul(int64_t m, int64_t n, int64_t k, const T* a, bool ta, const T* b_, T* c, Limit limit = Limit::none) const {
    product(m, n, k, ta ? Strided<T>{a, 1, m} : Strided<T>{a, k, 1}, b_, c, kAdd, limit);
  }
  // The tokens of block c that exist (the last block may be short).
  int64_t tokens(int64_t c) const { return std::min(b, p.length - c * b); }
  // Block c's q, k, w rows and betas into Q, K, W and beta, zeros past the sequence's end.
  void load(int64_t pair, int64_t c) {
    const int64_t n = tokens(c);
    for (int64_t r = 0; r < n; ++r) {
      copy_elements(p.q.template row<const T>(pair, c * b + r), D, Q.data() + r * D);
      copy_elements(p.k.template row<const T>(pair, c * b + r), D, K.data() + r * D);
      const T* state = p.state.template row<const T>(pair, c * b + r);
      copy_elements(state, D, W.data() + r * D);
      beta[r] = state[D];
    }
    zero_elements(Q.data() + n * D, (b - n) * D);
    zero_elements(K.data() + n * D, (b - n) * D);
    zero_elements(W.data() + n * D, (b - n) * D);
    zero_elements(beta.data() + n, b - n);
  }
  template <typename P>
  P* block(P* x, int64_t pair, int64_t c, int64_t size) const {
    return x + (c * p.pairs + pair) * size;
  }
  // Asks the caches for what block (pair, c) reads: its q, k and state rows and, for the backward,
  // its saved matrices and incoming gradients (the rows are scattered over the projections' memory
  // and the blocks come from other kernels, so a block's first reads would otherwise wait on them).
  void prefetch(int64_t pair, int64_t c, bool backward) const {
    const int64_t n = tokens(c);
    for (int64_t r = 0; r < n; ++r) {
      prefetch_bytes(p.q.template row<const T>(pair, c * b + r), D * sizeof(T));
      prefetch_bytes(p.k.template row<const T>(pair, c * b + r), D * sizeof(T));
      prefetch_bytes(p.state.template row<const T>(pair, c * b + r), (D + 1) * sizeof(T));
    }
    if (!backward) return;
    prefetch_bytes(block(static_cast<const T*>(p.saved), pair, c, saved_size), saved_size * sizeof(T));
    prefetch_bytes(block(static_cast<const T*>(p.d_own), pair, c, b * b), b * b * sizeof(T));
    prefetch_bytes(block(static_cast<const T*>(p.d_rows), pair, c, b * D), b * D * sizeof(T));
    prefetch_bytes(block(static_cast<const T*>(p.d_carried), pair, c, b * D), b * D * sizeof(T));
    prefetch_bytes(block(static_cast<const T*>(p.d_product), pair, c, D * D), D * D * sizeof(T));
  }
  static void prefetch_bytes(const void* x, int64_t bytes) {
    constexpr int64_t kLine = 64;
    const char* first = static_cast<const char*>(x);
    for (int64_t offset = 0; offset < bytes; offset += kLine) __builtin_prefetch(first + offset, 0, 2);
    __builtin_prefetch(first + bytes - 1, 0, 2);
  }

  // M = I + diag(beta) L unit lower: tr = T = M^-1 diag(beta) (T lower triangular), from
  // T_i = beta_i e_i - beta_i sum_{j < i} L_ij T_j with each row j, once final, taken from the rows
  // below it (consecutive updates touch different rows: no chain through memory).
  void solve_transform(const T* L, T* tr) const {
    zero_elements(tr, b * b);
    for (int64_t i = 0; i < b; ++i) tr[i * b + i] = beta[i];
    for (int64_t j = 0; j < b; ++j) {
      const T* final_row = tr + j * b;
      for (int64_t i = j + 1; i < b; ++i) {
        const T m = beta[i] * L[i * b + j];
        T* row = tr + i * b;
        for (int64_t c = 0; c <= j; ++c) row[c] -= m * final_row[c];
      }
    }
  }

  void forward(int64_t pair, int64_t c) {
    load(pair, c);
    const SavedBlock<T> s(block(static_cast<T*>(p.saved), pair, c, saved_size), b);
    T *tr = s.tr, *R = s.R, *L = s.L, *X = s.X, *U = s.U, *V = s.V;
    transpose(W.data(), b, D, Wt.data());
    transpose(K.data(), b, D, Kt.data());
    mul(b, b, D, W.data(), false, Wt.data(), L);
    keep_lower(L, b, false);
    solve_transform(L, tr);
    mul(b, b, D, W.data(), false, Kt.data(), R);
    keep_lower(R, b, false);
    mul(b, b, b, tr, false, R, U, Limit::sum_to_row_end);
    mul(b, D, b, tr, false, W.data(), V, Limit::sum_to_row_end);
    mul(b, b, D, Q.data(), false, Wt.data(), X);
    keep_lower(X, b, true);
    T* carried = block(static_cast<T*>(p.carried), pair, c, b * D);
    mul(b, D, b, U, true, W.data(), bD.data(), Limit::sum_from_row);  // U^T W
    for (int64_t e = 0; e < b * D; ++e) carried[e] = K[e] - bD[e];
    T* product = block(static_cast<T*>(p.product), pair, c, D * D);
    mul(D, D, b, W.data(), true, V, product);  // W^T V
    negate(product, D * D);
    for (int64_t d = 0; d < D; ++d) product[d * D + d] += T(1);
    T* own = block(static_cast<T*>(p.own), pair, c, b * b);
    mul(b, b, D, Q.data(), false, Kt.data(), own);
    mul(b, b, b, X, false, U, bb.data(), Limit::sum_to_row_end);
    subtract(own, bb.data(), b * b);
    keep_lower(own, b, true);
    T* rows = block(static_cast<T*>(p.rows), pair, c, b * D);
    mul(b, D, b, X, false, V, bD.data(), Limit::sum_to_row_end);
    for (int64_t e = 0; e < b * D; ++e) rows[e] = Q[e] - bD[e];
  }
};

// The scratch of the backward: transposes of the saved matrices and of two incoming gradients, the
// gradients of Q, K, W, X, U, V, T, R and beta, and the masked d own.
template <typename T>
struct Grads {
  std::vector<T> Rt, Tt, Ut, Vt, dct, dpt, dq, dk, dw, dx, du, dv, dt, dr, om, y, d_beta;
  Grads(int64_t b, int64_t D)
      : Rt(b * b),
        Tt(b * b),
        Ut(b * b),
        Vt(b * D),
        dct(b * D),
        dpt(D * D),
        dq(b * D),
        dk(b * D),
        dw(b * D),
        dx(b * b),
        du(b * b),
        dv(b * D),
        dt(b * b),
        dr(b * b),
        om(b * b),
        y(b * b),
        d_beta(b) {}
};

// The outputs' lines backwards: own = tril(Q K^T - X U), rows = Q - X V, carried = K - U^T W and
// product = I - W^T V; sets dq, dk, dw (from carried and product), dx (masked), du, dv.
template <typename T>
void output_grads(Block<T>& k, Grads<T>& g, const SavedBlock<const T>& s, const T* d_own, const T* d_rows,
                  const T* d_carried, const T* d_product) {
  const int64_t b = k.b, D = k.D;
  const T *Q = k.Q.data(), *K = k.K.data(), *W = k.W.data();
  copy_elements(d_own, b * b, g.om.data());  // own's gradient where own is kept
  keep_lower(g.om.data(), b, true);
  copy_elements(d_rows, b * D, g.dq.data());
  k.template mul<true>(b, D, b, g.om.data(), false, K, g.dq.data(), Limit::sum_to_row_end);  // om K
  k.mul(b, D, b, g.om.data(), true, Q, g.dk.data(), Limit::sum_from_row);                    // om^T Q
  for (int64_t e = 0; e < b * D; ++e) g.dk[e] += d_carried[e];
  k.mul(b, b, b, g.om.data(), false, g.Ut.data(), g.dx.data(), Limit::sum_to_row_end);  // -dX = om U^T + d_rows V^T
  k.template mul<true>(b, b, D, d_rows, false, g.Vt.data(), g.dx.data());
  negate(g.dx.data(), b * b);
  keep_lower(g.dx.data(), b, true);                                          // X's gradient where X is kept
  k.mul(b, b, b, s.X, true, g.om.data(), g.du.data(), Limit::sum_from_row);  // -dU = X^T om + W d_carried^T
  k.template mul<true>(b, b, D, W, false, g.dct.data(), g.du.data());
  negate(g.du.data(), b * b);
  k.mul(b, D, b, s.X, true, d_rows, g.dv.data(), Limit::sum_from_row);  // -dV = X^T d_rows + W d_product
  k.template mul<true>(b, D, D, W, false, d_product, g.dv.data());
  negate(g.dv.data(), b * D);
  k.mul(b, D, b, s.U, false, d_carried, g.dw.data(), Limit::sum_to_row_end);  // -dW = U d_carried + V d_product^T
  k.template mul<true>(b, D, D, s.V, false, g.dpt.data(), g.dw.data());
  negate(g.dw.data(), b * D);
}

// The inner lines backwards: X = tril(Q W^T), U = T R, V = T W and R = strictly_lower(W K^T); adds to
// dq, dk, dw and sets dt.
template <typename T>
void inner_grads(Block<T>& k, Grads<T>& g, const SavedBlock<const T>& s) {
  const int64_t b = k.b, D = k.D;
  const T *Q = k.Q.data(), *K = k.K.data(), *W = k.W.data();
  k.template mul<true>(b, D, b, g.dx.data(), false, W, g.dq.data(), Limit::sum_to_row_end);  // dX W
  k.template mul<true>(b, D, b, g.dx.data(), true, Q, g.dw.data(), Limit::sum_from_row);     // dX^T Q
  k.mul(b, b, b, g.du.data(), false, g.Rt.data(), g.dt.data());                              // dT = dU R^T + dV W^T
  k.template mul<true>(b, b, D, g.dv.data(), false, k.Wt.data(), g.dt.data());
  k.template mul<true>(b, D, b, s.tr, true, g.dv.data(), g.dw.data(), Limit::sum_from_row);  // T^T dV
  k.mul(b, b, b, s.tr, true, g.du.data(), g.dr.data(), Limit::sum_from_row);                 // dR = T^T dU
  keep_lower(g.dr.data(), b, false);  // R's gradient where R is kept
  k.template mul<true>(b, D, b, g.dr.data(), false, K, g.dw.data(), Limit::sum_to_row_end);
  k.template mul<true>(b, D, b, g.dr.data(), true, W, g.dk.data(), Limit::sum_from_row);
}

// T = M^-1 diag(beta) and L = strictly_lower(W W^T) backwards: Y = M^-T dT by back substitution
// (M_ij = beta_i L_ij, i > j), d beta = diag(Y) + (dM . L) by row, dM = -Y T^T, dL = diag(beta) dM;
// writes d beta, adds (dL + dL^T) W to dw.
template <typename T>
void transform_grads(Block<T>& k, Grads<T>& g, const T* L) {
  const int64_t b = k.b;
  const T* beta = k.beta.data();
  T* y = g.y.data();  // Y_i = dT_i - sum_{j > i} beta_j L_ji Y_j, each final row j taken from those above
  copy_elements(g.dt.data(), b * b, y);
  for (int64_t j = b - 1; j > 0; --j) {
    const T* final_row = y + j * b;
    for (int64_t i = 0; i < j; ++i) {
      const T m = beta[j] * L[j * b + i];
      T* row = y + i * b;
      for (int64_t e = 0; e < b; ++e) row[e] -= m * final_row[e];
    }
  }
  k.mul(b, b, b, y, false, g.Tt.data(), k.bb.data());  // -dM = Y T^T
  T* dl = g.om.data();                                 // d L, strictly lower
  for (int64_t i = 0; i < b; ++i) {
    T from_m = 0;
    for (int64_t j = 0; j < b; ++j) {
      const T dm = j < i ? -k.bb[i * b + j] : T(0);
      from_m += dm * L[i * b + j];
      dl[i * b + j] = beta[i] * dm;
    }
    g.d_beta[i] = y[i * b + i] + from_m;
  }
  for (int64_t i = 0; i < b; ++i)  // L = strictly_lower(W W^T): dW += (dL + dL^T) W
    for (int64_t j = 0; j < i; ++j) dl[j * b + i] = dl[i * b + j];
  k.template mul<true>(b, k.D, b, dl, false, k.W.data(), g.dw.data());
}

template <typename T>
void backward_block(Block<T>& k, Grads<T>& g, int64_t pair, int64_t c) {
  const PathInputsLaunch& p = k.p;
  const int64_t b = k.b, D = k.D;
  k.load(pair, c);
  const SavedBlock<const T> s(k.block(static_cast<const T*>(p.saved), pair, c, k.saved_size), b);
  const T* d_carried = k.block(static_cast<const T*>(p.d_carried), pair, c, b * D);
  const T* d_product = k.block(static_cast<const T*>(p.d_product), pair, c, D * D);
  transpose(k.W.data(), b, D, k.Wt.data());
  transpose(s.R, b, b, g.Rt.data());
  transpose(s.tr, b, b, g.Tt.data());
  transpose(s.U, b, b, g.Ut.data());
  transpose(s.V, b, D, g.Vt.data());
  transpose(d_carried, b, D, g.dct.data());
  transpose(d_product, D, D, g.dpt.data());
  output_grads(k, g, s, k.block(static_cast<const T*>(p.d_own), pair, c, b * b),
               k.block(static_cast<const T*>(p.d_rows), pair, c, b * D), d_carried, d_product);
  inner_grads(k, g, s);
  transform_grads(k, g, s.L);
  for (int64_t r = 0; r < k.tokens(c); ++r) {  // the rows of tokens that exist
    copy_elements(g.dq.data() + r * D, D, p.d_q.template row<T>(pair, c * b + r));
    copy_elements(g.dk.data() + r * D, D, p.d_k.template row<T>(pair, c * b + r));
    T* d_state = p.d_state.template row<T>(pair, c * b + r);
    copy_elements(g.dw.data() + r * D, D, d_state);
    d_state[D] = g.d_beta[r];
    zero_elements(d_state + D + 1, p.state_width - D - 1);
  }
}

template <typename T>
void forward_items(const PathInputsLaunch& p, int64_t first, int64_t last) {
  Block<T> k(p);
  for (int64_t item = first; item < last; ++item) {
    if (item + 1 < last) k.prefetch((item + 1) / p.blocks, (item + 1) % p.blocks, false);
    k.forward(item / p.blocks, item % p.blocks);
  }
}

template <typename T>
void backward_items(const PathInputsLaunch& p, int64_t first, int64_t last) {
  Block<T> k(p);
  Grads<T> g(p.block, p.head_dim);
  for (int64_t item = first; item < last; ++item) {
    if (item + 1 < last) k.prefetch((item + 1) / p.blocks, (item + 1) % p.blocks, true);
    backward_block(k, g, item / p.blocks, item % p.blocks);
  }
}

// The entry points: the block code compiled per x86-64 level and for AVX-512 with everything but
// the products inlined (flatten), so its substitutions and element loops take the CPU's vectors
// too, and its element loops kept as loops (not memmove and memset calls); double (the tests'
// precision) plain.
using Items = void (*)(const PathInputsLaunch&, int64_t, int64_t);
#define ROFORMER_BLOCK_CODE __attribute__((flatten, optimize("no-tree-loop-distribute-patterns")))
#define ROFORMER_PATH_INPUTS_ENTRIES(pass)                                                                      \
  ROFORMER_CLONES ROFORMER_BLOCK_CODE void pass##_f32(const PathInputsLaunch& p, int64_t first, int64_t last) { \
    pass##_items<float>(p, first, last);                                                                        \
  }                                                                                                             \
  ROFORMER_WIDE_TARGET ROFORMER_BLOCK_CODE void pass##_f32_wide(const PathInputsLaunch& p, int64_t first,       \
                                                                int64_t last) {                                 \
    pass##_items<float>(p, first, last);                                                                        \
  }                                                                                                             \
  void pass##_f64(const PathInputsLaunch& p, int64_t first, int64_t last) {                                     \
    pass##_items<double>(p, first, last);                                                                       \
  }                                                                                                             \
  Items pick_##pass(KernelDType dtype) {                                                                        \
    if (dtype == KernelDType::f64) return pass##_f64;                                                           \
    return cpu_vector_bytes() == 64 ? pass##_f32_wide : pass##_f32;                                             \
  }
ROFORMER_PATH_INPUTS_ENTRIES(forward)
ROFORMER_PATH_INPUTS_ENTRIES(backward)
#undef ROFORMER_PATH_INPUTS_ENTRIES
#undef ROFORMER_BLOCK_CODE

}  // namespace path_inputs

void path_inputs_forward_cpu(const PathInputsLaunch& p) {
  const path_inputs::Items items = path_inputs::pick_forward(p.dtype);
  for_each_claim(p.pairs * p.blocks, 4, [&](int64_t first, int64_t last) { items(p, first, last); });
}

void path_inputs_backward_cpu(const PathInputsLaunch& p) {
  const path_inputs::Items items = path_inputs::pick_backward(p.dtype);
  for_each_claim(p.pairs * p.blocks, 4, [&](int64_t first, int64_t last) { items(p, first, last); });
}

}  // namespace roformer::ops
