// The loop of tile attention's CPU kernel, shared by every term and compiled once per term (the
// term's _cpu.cpp in terms/). One item is a tile of query rows of one (batch, head): its key
// tiles are visited from the diagonal (causal) or the last key back to key 0; per tile, the
// scores q k^T of the tile (small_gemm.h, register-tiled, from k transposed; or the term's own),
// the scale, the term, an online softmax (each row's running maximum and sum, its output
// rescaled when the maximum grows) or stick-breaking, and the product of the weights with the
// tile's values. Only the item's score tile, its outputs and the term's per-row state are
// written; every tile stays in L1/L2. Each item is computed by one thread in a fixed order.
// A term is a class template Term<T> constructed from (launch, tables) with:
//   begin(b, h, i0, rows): a new item, query rows [i0, i0 + rows) of batch b, head h;
//   tile(j0, width):       a new key tile, keys [j0, j0 + width), before its rows;
//   add(r, i, j0, n, row): row r (query i) of the tile, keys [j0, j0 + n), all visible, holds the
//                          scaled scores q.k; the term is added in place;
//   output(width, weights, product): after the tile's weights (rows of kTileKeys) met its values
//                          in product (rows of D), a term of the weights added to product;
//   scores(j0, width, out): only a term that forms the scores itself: the tile's raw scores into
//                          out (rows of kTileKeys) instead of the product q k^T.
// The kernel visits an item's key tiles from the diagonal back to key 0, so a term may carry
// per-row state from tile to tile. Header-only and always inlined, so a term file's
// ROFORMER_CLONES functions compile it per instruction set.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "roformer/ops/common/cpu_kernel_support.h"
#include "roformer/ops/common/cpu_vectors.h"
#include "roformer/ops/common/exp_math.h"  // exp_nonpositive, sigmoid
#include "roformer/ops/common/small_gemm.h"
#include "roformer/ops/common/vector_exp.h"
#include "roformer/ops/tile_attention/tile_attention_kernels.h"

namespace roformer::ops::tile_loop {

// Whether a term forms the tile's scores itself (has scores()).
template <typename Term, typename = void>
struct forms_scores : std::false_type {};
template <typename Term>
struct forms_scores<Term, std::void_t<decltype(&Term::scores)>> : std::true_type {};
// Whether a term keeps something of each block of query rows once its keys are visited (has end()).
template <typename Term, typename = void>
struct ends_rows : std::false_type {};
template <typename Term>
struct ends_rows<Term, std::void_t<decltype(&Term::end)>> : std::true_type {};

// e^(x - top) for every lane of a vector of kBytes (float: vector_exp.h; double: the C library's per lane).
template <int kBytes, typename T>
ROFORMER_ALWAYS_INLINE typename small_gemm::Vec<T, kBytes>::type exp_below_vec(
    typename small_gemm::Vec<T, kBytes>::type x, T top) {
  if constexpr (std::is_same_v<T, float>) {
    return small_gemm::exp_nonpositive<kBytes>(x - top);
  } else {
    for (int i = 0; i < small_gemm::Vec<T, kBytes>::width; ++i) x[i] = std::exp(x[i] - top);
    return x;
  }
}
ROFORMER_ALWAYS_INLINE float exp_below(float x, float top) {
  return exp_nonpositive(x - top);
}
ROFORMER_ALWAYS_INLINE double exp_below(double x, double top) {
  return std::exp(x - top);
}

// max(start, row[0, n)), in vectors of kBytes where the row has them.
template <int kBytes, typename T>
ROFORMER_ALWAYS_INLINE T row_max(const T* row, int64_t n, T start) {
  using vec = typename small_gemm::Vec<T, kBytes>::type;
  constexpr int W = small_gemm::Vec<T, kBytes>::width;
  T top = start;
  int64_t c = 0;
  if (n >= W) {
    vec m = small_gemm::load<kBytes>(row);
    for (c = W; c + W <= n; c += W) {
      const vec x = small_gemm::load<kBytes>(row + c);
      m = x > m ? x : m;
    }
    for (int i = 0; i < W; ++i) top = m[i] > top ? m[i] : top;
  }
  for (; c < n; ++c) top = row[c] > top ? row[c] : top;
  return top;
}

// The sum of row[0, n), in vectors of kBytes where the row has them.
template <int kBytes, typename T>
ROFORMER_ALWAYS_INLINE T row_sum(const T* row, int64_t n) {
  using vec = typename small_gemm::Vec<T, kBytes>::type;
  constexpr int W = small_gemm::Vec<T, kBytes>::width;
  vec acc = vec{};
  int64_t c = 0;
  for (; c + W <= n; c += W) acc += small_gemm::load<kBytes>(row + c);
  T sum = 0;
  for (; c < n; ++c) sum += row[c];
  for (int i = 0; i < W; ++i) sum += acc[i];
  return sum;
}

// row[c] = e^(row[c] - top) for c < n; returns their sum.
template <int kBytes, typename T>
ROFORMER_ALWAYS_INLINE T exp_row(T* row, int64_t n, T top) {
  using vec = typename small_gemm::Vec<T, kBytes>::type;
  constexpr int W = small_gemm::Vec<T, kBytes>::width;
  vec acc = vec{};
  int64_t c = 0;
  for (; c + W <= n; c += W) {
    const vec x = exp_below_vec<kBytes, T>(small_gemm::load<kBytes>(row + c), top);
    acc += x;
    small_gemm::store<kBytes>(row + c, x);
  }
  T sum = 0;
  for (; c < n; ++c) {
    row[c] = exp_below(row[c], top);
    sum += row[c];
  }
  for (int i = 0; i < W; ++i) sum += acc[i];
  return sum;
}

// One item's buffers, reused by the thread from item to item.
template <typename T>
struct Scratch {
  std::vector<T> scores, far, product, out, maximum, sum, rescale, kept;
  std::vector<double> left;  // stick-breaking: per row, what the sticks of the keys visited leave
  explicit Scratch(int64_t D, bool two_rotations)
      : scores(kTileQueryRows * kTileKeys),
        far(two_rotations ? kTileQueryRows * kTileKeys : 0),
        product(kTileQueryRows * D),
        out(kTileQueryRows * D),
        maximum(kTileQueryRows),
        sum(kTileQueryRows),
        rescale(kTileQueryRows),
        kept(kTileKeys),
        left(kTileQueryRows) {}
};

// Row r's scores [0, n) of a tile of `width` keys become weights e^(s - m) under its new running
// maximum m (keys [n, width) get 0); returns the factor on the row's earlier sum and output.
template <int kBytes, typename T>
ROFORMER_ALWAYS_INLINE T softmax_step(T* row, int64_t n, int64_t width, T& maximum, T& sum) {
  if (n == 0) {
    std::fill(row, row + width, T(0));
    return T(1);
  }
  const T top = row_max<kBytes>(row, n, maximum);
  // Once a long row's maximum is found it rarely grows: e^0 = 1 without the call.
  const T factor = maximum == top                                   ? T(1)
                   : maximum == -std::numeric_limits<T>::infinity() ? T(0)
                                                                    : exp_below(maximum, top);
  const T added = exp_row<kBytes>(row, n, top);
  std::fill(row + n, row + width, T(0));
  maximum = top;
  sum = sum * factor + added;
  return factor;
}

// Stick-breaking weights of a row's keys [0, n) (all before the query) from the last back:
// w = sigmoid(z) x left, then left *= sigmoid(-z), `left` (double, carried between tiles) what
// the sticks of the keys after it leave; keys [n, width) get 0; the weights' sum is added to
// `sum`. The sigmoids in one vectorisable pass (exp_math.h's), the product as the scan.
template <typename T>
ROFORMER_ALWAYS_INLINE void stick_step(T* row, int64_t n, int64_t width, double& left, T& sum, T* kept) {
  for (int64_t c = 0; c < n; ++c) {
    kept[c] = sigmoid(-row[c]);
    row[c] = sigmoid(row[c]);
  }
  double l = left, added = 0;
  for (int64_t c = n - 1; c >= 0; --c) {
    const double weight = double(row[c]) * l;
    l *= double(kept[c]);
    row[c] = static_cast<T>(weight);
    added += weight;
  }
  std::fill(row + n, row + width, T(0));
  left = l;
  sum += static_cast<T>(added);
}

// The scores q k^T of query rows [i0, i0 + rows) against keys [j0, j0 + width) into w.scores
// (row stride kTileKeys); with two rotations, the far product where i - j >= far_from, each
// product formed only where the tile has pairs on its side.
template <int kBytes, typename T>
ROFORMER_ALWAYS_INLINE void tile_scores(const TileAttentionLaunch& p, int64_t pair, int64_t i0, int64_t rows,
                                        int64_t j0, int64_t width, Scratch<T>& w) {
  constexpr int64_t W = small_gemm::Vec<T, kBytes>::width;
  const int64_t D = p.head_dim, b = pair / p.heads, h = pair % p.heads, padded = (width + W - 1) / W * W;
  // Always inlined (a lambda is its own function otherwise, compiled without the caller's clones).
  auto product = [&](const void* q_base, const int64_t* stride, const void* kt_base, T* out)
      __attribute__((always_inline)) {
    const T* q = static_cast<const T*>(q_base) + b * stride[0] + h * stride[1] + i0 * stride[2];
    const T* kt = static_cast<const T*>(kt_base) + pair * D * p.kt_ld + j0;
    small_gemm::gemm<T, false, kBytes>(rows, padded, D, {q, stride[2], 1}, kt, p.kt_ld, out, kTileKeys);
  };
  if (p.chunk > 0) {  // chunks: the pair's chunk gap picks the queries
    const int64_t c = p.chunk, gap_min = i0 / c - (j0 + width - 1) / c, gap_max = (i0 + rows - 1) / c - j0 / c;
    if (gap_max >= 2) {
      product(p.far_q, p.far_q_stride, p.far_kt, w.scores.data());
    } else {
      product(gap_max == 1 ? p.mid_q : p.q, gap_max == 1 ? p.mid_q_stride : p.q_stride, p.kt, w.scores.data());
    }
    for (int64_t gap = std::min<int64_t>(gap_max, 2) - 1; gap >= std::max<int64_t>(gap_min, 0); --gap) {
      product(gap == 1 ? p.mid_q : p.q, gap == 1 ? p.mid_q_stride : p.q_stride, p.kt, w.far.data());
      for (int64_t r = 0; r < rows; ++r) {  // keys of chunk floor(i / c) - gap
        const int64_t first = ((i0 + r) / c - gap) * c;
        const int64_t c0 = std::clamp<int64_t>(first - j0, 0, width),
                      c1 = std::clamp<int64_t>(first + c - j0, 0, width);
        std::copy(w.far.data() + r * kTileKeys + c0, w.far.data() + r * kTileKeys + c1,
                  w.scores.data() + r * kTileKeys + c0);
      }
    }
    return;
  }
  const int64_t nearest = i0 - (j0 + width - 1), farthest = i0 + rows - 1 - j0;  // distances in the tile
  if (p.far_q != nullptr && nearest >= p.far_from) {
    product(p.far_q, p.far_q_stride, p.far_kt, w.scores.data());
    return;
  }
  product(p.q, p.q_stride, p.kt, w.scores.data());
  if (p.far_q == nullptr || farthest < p.far_from) return;
  product(p.far_q, p.far_q_stride, p.far_kt, w.far.data());
  for (int64_t r = 0; r < rows; ++r) {  // keys j <= i - far_from take the far scores
    const int64_t far_keys = std::clamp<int64_t>(i0 + r - p.far_from - j0 + 1, 0, width);
    std::copy(w.far.data() + r * kTileKeys, w.far.data() + r * kTileKeys + far_keys, w.scores.data() + r * kTileKeys);
  }
}

template <int kBytes, typename T, typename Term>
ROFORMER_ALWAYS_INLINE void run_item(const TileAttentionLaunch& p, int64_t item, Term& term, Scratch<T>& w) {
  const int64_t D = p.head_dim, S = p.seq, tiles = (S + kTileQueryRows - 1) / kTileQueryRows;
  const int64_t pair = item / tiles, b = pair / p.heads, h = pair % p.heads;
  const int64_t i0 = (tiles - 1 - item % tiles) * kTileQueryRows, rows = std::min(kTileQueryRows, S - i0);
  const T* v = static_cast<const T*>(p.v) + b * p.v_stride[0] + h * p.v_stride[1];
  const T scale = static_cast<T>(p.scale);
  std::fill(w.out.begin(), w.out.begin() + rows * D, T(0));
  std::fill(w.maximum.begin(), w.maximum.end(), -std::numeric_limits<T>::infinity());
  std::fill(w.sum.begin(), w.sum.end(), T(0));
  std::fill(w.left.begin(), w.left.end(), 1.0);
  std::fill(w.rescale.begin(), w.rescale.end(), T(1));
  const bool sticks = p.normalizer != 0;
  term.begin(b, h, i0, rows);
  int64_t key_end = p.causal ? i0 + rows : S;
  if (p.key_lengths != nullptr) key_end = std::min(key_end, p.key_lengths[b]);  // padded keys: never visited
  for (int64_t j0 = (key_end - 1) / kTileKeys * kTileKeys; j0 >= 0; j0 -= kTileKeys) {
    const int64_t width = std::min(key_end, j0 + kTileKeys) - j0;
    if constexpr (forms_scores<Term>::value) {
      term.scores(j0, width, w.scores.data());
    } else {
      tile_scores<kBytes>(p, pair, i0, rows, j0, width, w);
    }
    term.tile(j0, width);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = i0 + r;
      // The term's keys: j <= i causal (CoPE counts the diagonal's gate under stick-breaking too),
      // all; the weighted keys: those, but j < i under stick-breaking.
      const int64_t seen = p.causal ? std::clamp<int64_t>(i + 1 - j0, 0, width) : width;
      const int64_t n = sticks && p.causal ? std::clamp<int64_t>(i - j0, 0, width) : seen;
      T* row = w.scores.data() + r * kTileKeys;
      for (int64_t c = 0; c < seen; ++c) row[c] *= scale;
      if (seen > 0) term.add(r, i, j0, seen, row);
      if (sticks) {
        stick_step(row, n, width, w.left[r], w.sum[r], w.kept.data());
      } else {
        w.rescale[r] = softmax_step<kBytes>(row, n, width, w.maximum[r], w.sum[r]);
      }
    }
    small_gemm::gemm<T, false, kBytes>(rows, D, width, {w.scores.data(), kTileKeys, 1}, v + j0 * p.v_stride[2],
                                       p.v_stride[2], w.product.data(), D);
    term.output(width, w.scores.data(), w.product.data());
    for (int64_t r = 0; r < rows; ++r) {
      T* o = w.out.data() + r * D;
      const T* add = w.product.data() + r * D;
      const T f = w.rescale[r];
      for (int64_t d = 0; d < D; ++d) o[d] = o[d] * f + add[d];
    }
  }
  if constexpr (ends_rows<Term>::value) term.end();
  T* out = static_cast<T*>(p.out) + b * p.out_stride[0] + h * p.out_stride[1] + i0 * p.out_stride[2];
  if (p.lse != nullptr && !sticks) {
    T* lse = static_cast<T*>(p.lse) + pair * S + i0;
    for (int64_t r = 0; r < rows; ++r) lse[r] = w.maximum[r] + std::log(w.sum[r]);
  }
  for (int64_t r = 0; r < rows; ++r) {
    T* o = out + r * p.out_stride[2];
    if (!sticks) {
      const T inv = T(1) / w.sum[r];
      for (int64_t d = 0; d < D; ++d) o[d] = w.out[r * D + d] * inv;
    } else if (p.normalizer == 2) {  // the remainder on the query's own value
      const T* own = v + (i0 + r) * p.v_stride[2];
      const T remainder = T(1) - w.sum[r];
      for (int64_t d = 0; d < D; ++d) o[d] = w.out[r * D + d] + remainder * own[d];
    } else {
      for (int64_t d = 0; d < D; ++d) o[d] = w.out[r * D + d];
    }
  }
}

// Items [first, last) with the term Term<T, kBytes>, constructed from the launch and the term's
// tables, its products in vectors of kBytes (64: x86-64-v4 callers only).
template <typename T, template <typename, int> class Term, int kBytes>
ROFORMER_ALWAYS_INLINE void run_items(const TileAttentionLaunch& p, const void* tables, int64_t first, int64_t last) {
  Scratch<T> scratch(p.head_dim, p.far_q != nullptr || p.chunk > 0);
  Term<T, kBytes> term(p, tables);
  for (int64_t item = first; item < last; ++item) run_item<kBytes>(p, item, term, scratch);
}

}  // namespace roformer::ops::tile_loop

// Defines `TileItems items_name(KernelDType)`: the loop's items with the term Term (a class
// template <typename T, int kBytes>, fully qualified), in float compiled per x86-64 level
// (ROFORMER_CLONES takes no templates) and in double (the tests' precision) once, each with
// 32-byte vectors and, where ops::cpu_vector_bytes() says 64, with AVX-512's 64-byte vectors
// instead. Used at namespace roformer::ops.
#define ROFORMER_TILE_TERM_ITEMS(items_name, Term)                                                             \
  namespace items_name##_compiled {                                                                            \
    ROFORMER_CLONES void f32(const TileAttentionLaunch& p, const void* tables, int64_t first, int64_t last) {  \
      tile_loop::run_items<float, Term, 32>(p, tables, first, last);                                           \
    }                                                                                                          \
    void f64(const TileAttentionLaunch& p, const void* tables, int64_t first, int64_t last) {                  \
      tile_loop::run_items<double, Term, 32>(p, tables, first, last);                                          \
    }                                                                                                          \
    ROFORMER_WIDE_TARGET void f32_wide(const TileAttentionLaunch& p, const void* tables, int64_t first,        \
                                       int64_t last) {                                                         \
      tile_loop::run_items<float, Term, ROFORMER_WIDE_VECTORS ? 64 : 32>(p, tables, first, last);              \
    }                                                                                                          \
    ROFORMER_WIDE_TARGET void f64_wide(const TileAttentionLaunch& p, const void* tables, int64_t first,        \
                                       int64_t last) {                                                         \
      tile_loop::run_items<double, Term, ROFORMER_WIDE_VECTORS ? 64 : 32>(p, tables, first, last);             \
    }                                                                                                          \
  }                                                                                                            \
  TileItems items_name(KernelDType dtype) {                                                                    \
    const bool wide = cpu_vector_bytes() == 64;                                                                \
    if (dtype == KernelDType::f64) return wide ? items_name##_compiled::f64_wide : items_name##_compiled::f64; \
    return wide ? items_name##_compiled::f32_wide : items_name##_compiled::f32;                                \
  }
