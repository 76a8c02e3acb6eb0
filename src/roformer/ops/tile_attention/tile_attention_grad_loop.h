// The backward of tile attention's CPU kernel (softmax or stick-breaking, no rotations), shared by every term that
// has one and compiled once per term (the term's _cpu.cpp in terms/). One item is a (batch, head)
// pair: its query tiles in order and, per query tile, its key tiles as the forward visits them
// (from the diagonal back to key 0). Per tile: the scores recomputed as the forward forms them
// (q k^T, no rotations, and the term's add), the weights P = e^(s - lse) from the forward's
// log-sum-exp, dP = dO v^T (plus the term's value part), dS = P (dP - delta), then dq += dS k,
// dk += dS^T q, dv += P^T dO and the term's gradients from dS and P (FlashAttention-2's backward,
// Dao 2023, Algorithm 2; a pair's tiles on one thread, so dk and dv are accumulated without
// atomics; a term with kKeysAscending is visited from key 0 up instead). A term adds to the
// forward's interface (tile_attention_loop.h):
//   grad_begin():                    after begin(), a new query tile;
//   grad_tile(dO, ld):               after tile(), the tile's part that needs dO (rows of ld);
//   grad_dp(r, i, j0, n, dp):        row r's dP over keys [j0, j0 + n) gains the term's value part;
//   grad_row(r, i, j0, n, ds, p):    row r's dS and P (zero past n; called for n = 0 too), for a
//                                    term's per-pair gradients; a term whose scores also feed it
//                                    (CoPE's gates) adds its part to ds, which dq and dk then take;
//   grad_tile_end(width, ds, p, dO, ld): after every row, for a term's per-tile products;
//   grad_end():                      the query tile's gradients written.
// The term's gradients are of its unscaled products (the caller applies the scale), as are q's
// and k's. Header-only and always inlined, like the forward loop.
#pragma once

#include <algorithm>
#include <type_traits>
#include <vector>

#include "roformer/ops/common/cpu_kernel_support.h"
#include "roformer/ops/common/small_gemm.h"
#include "roformer/ops/tile_attention/tile_attention_kernels.h"
#include "roformer/ops/tile_attention/tile_attention_loop.h"

namespace roformer::ops::tile_grad_loop {

// Whether a term's backward visits a row's keys from key 0 up (Term::kKeysAscending), else from the
// diagonal back as the forward does.
template <typename Term, typename = void>
struct keys_ascending : std::false_type {};
template <typename Term>
struct keys_ascending<Term, std::void_t<decltype(Term::kKeysAscending)>> : std::bool_constant<Term::kKeysAscending> {};

// A pair's buffers besides the forward's scratch, reused from pair to pair; stick-breaking's per
// row state in double (as the forward carries its sticks): what the sticks of the keys visited
// leave, the sum of g over them, the row's total of g and its dO . v_i.
template <typename T>
struct GradScratch {
  std::vector<T> dp, dq;
  std::vector<double> left, later, total, own;
  explicit GradScratch(int64_t D)
      : dp(kTileQueryRows * kTileKeys),
        dq(kTileQueryRows * D),
        left(kTileQueryRows),
        later(kTileQueryRows),
        total(kTileQueryRows),
        own(kTileQueryRows) {}
};

// Stick-breaking's weights and score gradients of a row's keys [0, n) (all before the query), from
// the last back as the forward forms them: w = sigmoid(z) x left, left *= sigmoid(-z). With
// g_j = w_j (dP_j - own) (own: dO . v_i when the remainder goes to the query's value, else 0),
// dz_j = g_j sigmoid(-z_j) - sigmoid(z_j) sum_{j' < j} g_j', the last sum the row's total less the
// g of the keys from j on (Tan et al. 2025's weights differentiated in log space). s: z in, dz
// out; dp: dP in, w out; both zero from n to `padded`.
// The sigmoids in one vectorisable pass and the scan in double, as the forward's stick_step.
template <typename T>
ROFORMER_ALWAYS_INLINE void stick_grads(T* s, T* dp, T* kept, int64_t n, int64_t padded, double own, double total,
                                        double& left, double& later) {
  for (int64_t c = 0; c < n; ++c) {
    kept[c] = sigmoid(-s[c]);
    s[c] = sigmoid(s[c]);
  }
  for (int64_t c = n - 1; c >= 0; --c) {
    const double on = double(s[c]), off = double(kept[c]);
    const double weight = on * left, g = weight * (double(dp[c]) - own);
    later += g;
    s[c] = static_cast<T>(g * off - on * (total - later));
    dp[c] = static_cast<T>(weight);
    left *= off;
  }
  std::fill(s + n, s + padded, T(0));
  std::fill(dp + n, dp + padded, T(0));
}

// A row's weights P = e^(s - lse) over its visible keys [0, n), zero to `padded`.
template <int kBytes, typename T>
ROFORMER_ALWAYS_INLINE void weights_from_lse(T* s, int64_t n, int64_t padded, T lse) {
  constexpr int W = small_gemm::Vec<T, kBytes>::width;
  int64_t c = 0;
  for (; c + W <= n; c += W)
    small_gemm::store<kBytes>(s + c, tile_loop::exp_below_vec<kBytes, T>(small_gemm::load<kBytes>(s + c), lse));
  for (; c < n; ++c) s[c] = tile_loop::exp_below(s[c], lse);
  std::fill(s + n, s + padded, T(0));
}

template <int kBytes, typename T, typename Term>
ROFORMER_ALWAYS_INLINE void run_query_tile(const TileAttentionLaunch& p, const TileAttentionGrad& g, int64_t pair,
                                           int64_t i0, Term& term, tile_loop::Scratch<T>& w, GradScratch<T>& gw) {
  constexpr int64_t W = small_gemm::Vec<T, kBytes>::width;
  const int64_t D = p.head_dim, S = p.seq, b = pair / p.heads, h = pair % p.heads;
  const int64_t rows = std::min(kTileQueryRows, S - i0);
  const T scale = static_cast<T>(p.scale);
  const T* q = static_cast<const T*>(p.q) + b * p.q_stride[0] + h * p.q_stride[1] + i0 * p.q_stride[2];
  const T* k = static_cast<const T*>(g.k) + b * g.k_stride[0] + h * g.k_stride[1];
  const T* dout = static_cast<const T*>(g.grad_out) + b * g.grad_out_stride[0] + h * g.grad_out_stride[1] +
                  i0 * g.grad_out_stride[2];
  const int64_t dout_ld = g.grad_out_stride[2];
  const T* vt = static_cast<const T*>(g.vt) + pair * D * p.kt_ld;
  const T* kt = static_cast<const T*>(p.kt) + pair * D * p.kt_ld;
  const T* lse = g.lse == nullptr ? nullptr : static_cast<const T*>(g.lse) + pair * S + i0;  // softmax's
  const T* delta = static_cast<const T*>(g.delta) + pair * S + i0;
  T* dk = static_cast<T*>(g.grad_k) + pair * S * D;
  T* dv = static_cast<T*>(g.grad_v) + pair * S * D;
  T* ds = w.scores.data();
  const T* v = static_cast<const T*>(p.v) + b * p.v_stride[0] + h * p.v_stride[1];
  const bool sticks = p.normalizer != 0;
  std::fill(gw.dq.begin(), gw.dq.begin() + rows * D, T(0));
  if (sticks) {
    for (int64_t r = 0; r < rows; ++r) {
      double own = 0;
      if (p.normalizer == 2)
        for (int64_t x = 0; x < D; ++x) own += double(dout[r * dout_ld + x]) * double(v[(i0 + r) * p.v_stride[2] + x]);
      gw.own[r] = own;
      gw.total[r] = double(delta[r]) - own;  // sum_j g_j = dO . O - own (the sticks and what they leave add to 1)
      gw.left[r] = 1;
      gw.later[r] = 0;
    }
  }
  term.begin(b, h, i0, rows);
  term.grad_begin();
  int64_t key_end = p.causal ? i0 + rows : S;
  if (p.key_lengths != nullptr) key_end = std::min(key_end, p.key_lengths[b]);
  const int64_t last_tile = (key_end - 1) / kTileKeys * kTileKeys;
  constexpr bool ascending = keys_ascending<Term>::value;
  for (int64_t j0 = ascending ? 0 : last_tile; ascending ? j0 <= last_tile : j0 >= 0;
       j0 += ascending ? kTileKeys : -kTileKeys) {
    const int64_t width = std::min(key_end, j0 + kTileKeys) - j0, padded = (width + W - 1) / W * W;
    // q k^T alone: the backward takes no rotations (tile_attention_trains).
    small_gemm::gemm<T, false, kBytes>(rows, padded, D, {q, p.q_stride[2], 1}, kt + j0, p.kt_ld, ds, kTileKeys);
    term.tile(j0, width);
    term.grad_tile(dout, dout_ld);
    small_gemm::gemm<T, false, kBytes>(rows, padded, D, {dout, dout_ld, 1}, vt + j0, p.kt_ld, gw.dp.data(), kTileKeys);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = i0 + r;
      // The term's keys (seen) and the weighted keys (n), as the forward's (tile_attention_loop.h).
      const int64_t seen = p.causal ? std::clamp<int64_t>(i + 1 - j0, 0, width) : width;
      const int64_t n = sticks && p.causal ? std::clamp<int64_t>(i - j0, 0, width) : seen;
      T* s = ds + r * kTileKeys;
      T* dp = gw.dp.data() + r * kTileKeys;
      for (int64_t c = 0; c < seen; ++c) s[c] *= scale;
      if (seen > 0) term.add(r, i, j0, seen, s);
      if (sticks) {
        term.grad_dp(r, i, j0, n, dp);
        stick_grads(s, dp, w.kept.data(), n, padded, gw.own[r], gw.total[r], gw.left[r], gw.later[r]);
      } else {
        weights_from_lse<kBytes>(s, n, padded, lse[r]);
        term.grad_dp(r, i, j0, n, dp);
        // dv needs P and dS replaces it: dP's row keeps P until the row's dS is formed.
        for (int64_t c = 0; c < n; ++c) {
          const T weight = s[c];
          s[c] = weight * (dp[c] - delta[r]);
          dp[c] = weight;
        }
        std::fill(dp + n, dp + padded, T(0));
      }
      term.grad_row(r, i, j0, seen, s, dp);  // every row, none seen too (the diagonal's dS: its gate's alone)
    }
    // dq += dS k, dk += dS^T q, dv += P^T dO (P now in dp).
    small_gemm::gemm<T, true, kBytes>(rows, D, width, {ds, kTileKeys, 1}, k + j0 * g.k_stride[2], g.k_stride[2],
                                      gw.dq.data(), D);
    small_gemm::gemm<T, true, kBytes>(width, D, rows, {ds, 1, kTileKeys}, q, p.q_stride[2], dk + j0 * D, D);
    small_gemm::gemm<T, true, kBytes>(width, D, rows, {gw.dp.data(), 1, kTileKeys}, dout, dout_ld, dv + j0 * D, D);
    term.grad_tile_end(width, ds, gw.dp.data(), dout, dout_ld);
  }
  T* dq = static_cast<T*>(g.grad_q) + (pair * S + i0) * D;
  std::copy(gw.dq.begin(), gw.dq.begin() + rows * D, dq);
  if (p.normalizer == 2)  // what the sticks leave weighs the query's own value
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t x = 0; x < D; ++x) dv[(i0 + r) * D + x] += static_cast<T>(gw.left[r]) * dout[r * dout_ld + x];
  term.grad_end();
}

// Pairs [first, last) with the term Term<T, kBytes>, constructed from the launch and its tables.
template <typename T, template <typename, int> class Term, int kBytes>
ROFORMER_ALWAYS_INLINE void run_pairs(const TileAttentionLaunch& p, const TileAttentionGrad& g, const void* tables,
                                      int64_t first, int64_t last) {
  tile_loop::Scratch<T> scratch(p.head_dim, false);
  GradScratch<T> grad_scratch(p.head_dim);
  Term<T, kBytes> term(p, tables);
  for (int64_t pair = first; pair < last; ++pair)
    for (int64_t i0 = 0; i0 < p.seq; i0 += kTileQueryRows)
      run_query_tile<kBytes>(p, g, pair, i0, term, scratch, grad_scratch);
}

}  // namespace roformer::ops::tile_grad_loop

// Defines `TileGradPairs pairs_name(KernelDType)`: the backward's pairs with the term Term, compiled
// as ROFORMER_TILE_TERM_ITEMS compiles the forward's items but for double, which (the tests'
// precision) keeps 32-byte vectors. Used at namespace roformer::ops.
#define ROFORMER_TILE_TERM_GRAD_PAIRS(pairs_name, Term)                                                              \
  namespace pairs_name##_compiled {                                                                                  \
    ROFORMER_CLONES void f32(const TileAttentionLaunch& p, const TileAttentionGrad& g, const void* tables,           \
                             int64_t first, int64_t last) {                                                          \
      tile_grad_loop::run_pairs<float, Term, 32>(p, g, tables, first, last);                                         \
    }                                                                                                                \
    void f64(const TileAttentionLaunch& p, const TileAttentionGrad& g, const void* tables, int64_t first,            \
             int64_t last) {                                                                                         \
      tile_grad_loop::run_pairs<double, Term, 32>(p, g, tables, first, last);                                        \
    }                                                                                                                \
    ROFORMER_WIDE_TARGET void f32_wide(const TileAttentionLaunch& p, const TileAttentionGrad& g, const void* tables, \
                                       int64_t first, int64_t last) {                                                \
      tile_grad_loop::run_pairs<float, Term, ROFORMER_WIDE_VECTORS ? 64 : 32>(p, g, tables, first, last);            \
    }                                                                                                                \
  }                                                                                                                  \
  TileGradPairs pairs_name(KernelDType dtype) {                                                                      \
    if (dtype == KernelDType::f64) return pairs_name##_compiled::f64;                                                \
    return cpu_vector_bytes() == 64 ? pairs_name##_compiled::f32_wide : pairs_name##_compiled::f32;                  \
  }
