// CPU kernel of the short-sequence attention op: one (batch, head) pair at a time, all of its
// S x S scores in cache (past 512 tokens a block of whole query rows at a time). Forward: scores = q (scale k)^T, a row
// softmax (exact, not online), out = probs v, each row's log-sum-exp kept for the backward when asked. Backward: probs
// recomputed as exp(scores - lse) (writing and rereading B H S^2 probabilities cost more than one more product on this
// hardware), dv = probs^T dout, dprobs = dout v^T, dscores = probs (dprobs - rowsum(probs . dprobs)) scale, dq =
// dscores k, dk = dscores^T q. Every product goes through small_gemm.h; causal pairs skip the blocks above the
// diagonal. With CoPE's term (short_attention_cope) each score row gains its term before the softmax, and the backward
// sends d logits through the term's row gradient (ops/common/cope_rows.h) before the products. Pairs run in parallel,
// the threads claiming them from a shared counter; each pair's result is computed by one thread in a fixed order, so it
// does not depend on the thread count or on which thread took it. Vectors pass by value between always-inlined helpers
// (see small_gemm.h), exp_reduced included; before the includes, so the helpers' own lines are covered too.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "roformer/ops/common/cope_rows.h"
#include "roformer/ops/common/cpu_kernel_support.h"
#include "roformer/ops/common/cpu_vectors.h"
#include "roformer/ops/common/exp_math.h"  // exp_reduced, the float exp shared with GELU
#include "roformer/ops/common/small_gemm.h"
#include "roformer/ops/common/vector_exp.h"
#include "roformer/ops/short_attention/short_attention_kernels.h"

namespace roformer::ops {
namespace {

using small_gemm::Limit;
using small_gemm::Strided;

// One (batch, head) pair's rows of an operand.
template <typename T>
struct Rows {
  T* data;
  int64_t stride;
};

template <typename T>
ROFORMER_ALWAYS_INLINE Rows<T> rows_of(const AttentionOperand& t, int64_t pair, int64_t heads) {
  const int64_t b = pair / heads, h = pair % heads;
  return {static_cast<T*>(t.data) + b * t.stride[0] + h * t.stride[1], t.stride[2]};
}

// dst[d * ld + j] = src row j, column d, times `factor` for j < S; zero for S <= j < ld. Blocks of
// one vector's width of rows: each column of the block is gathered into a vector and stored whole
// (scattered scalar stores 4 ld bytes apart stalled on false store-to-load aliasing).
template <typename T>
ROFORMER_ALWAYS_INLINE void transpose_padded(Rows<const T> src, int64_t S, int64_t D, int64_t ld, T factor, T* dst) {
  constexpr int W = small_gemm::Vec<T>::width;
  int64_t j0 = 0;
  for (; j0 + W <= S; j0 += W) {
    const T* rows = src.data + j0 * src.stride;
    for (int64_t d = 0; d < D; ++d) {
      typename small_gemm::Vec<T>::type x;
      for (int i = 0; i < W; ++i) x[i] = rows[i * src.stride + d];
      small_gemm::store(dst + d * ld + j0, x * factor);
    }
  }
  for (int64_t d = 0; d < D; ++d) {
    for (int64_t j = j0; j < S; ++j) dst[d * ld + j] = src.data[j * src.stride + d] * factor;
    for (int64_t j = S; j < ld; ++j) dst[d * ld + j] = T(0);
  }
}

// The last key row i attends to, plus one.
ROFORMER_ALWAYS_INLINE int64_t row_end(const ShortAttentionLaunch& p, int64_t i) {
  return p.causal ? i + 1 : p.seq;
}

using small_gemm::exp_nonpositive;

// Softmax over row[0, end) in place, in vectors where the row has them; row[end, ld) set to zero.
// Returns the row's log-sum-exp.
template <typename T>
ROFORMER_ALWAYS_INLINE T softmax_row(T* row, int64_t end, int64_t ld) {
  using vec = typename small_gemm::Vec<T>::type;
  constexpr int W = small_gemm::Vec<T>::width;
  const int64_t whole = end / W * W;
  T top = row[0];
  if (whole > 0) {
    vec m = small_gemm::load(row);
    for (int64_t j = W; j < whole; j += W) {
      const vec x = small_gemm::load(row + j);
      m = x > m ? x : m;
    }
    for (int i = 0; i < W; ++i) top = m[i] > top ? m[i] : top;
  }
  for (int64_t j = whole; j < end; ++j) top = row[j] > top ? row[j] : top;
  vec acc = vec{};
  T sum = 0;
  for (int64_t j = 0; j < whole; j += W) {
    vec x = small_gemm::load(row + j) - top;
    if constexpr (std::is_same_v<T, float>) {
      x = exp_nonpositive(x);
    } else {
      for (int i = 0; i < W; ++i) x[i] = std::exp(x[i]);
    }
    acc += x;
    small_gemm::store(row + j, x);
  }
  for (int64_t j = whole; j < end; ++j) {
    row[j] = std::exp(row[j] - top);
    sum += row[j];
  }
  for (int i = 0; i < W; ++i) sum += acc[i];
  const T inv = T(1) / sum;
  for (int64_t j = 0; j < end; ++j) row[j] *= inv;
  for (int64_t j = end; j < ld; ++j) row[j] = T(0);
  return top + std::log(sum);
}

// row[j] = exp(row[j] - lse) for j < end (the probabilities again), zero for end <= j < ld.
template <typename T>
ROFORMER_ALWAYS_INLINE void probs_from_lse(T* row, int64_t end, int64_t ld, T lse) {
  constexpr int W = small_gemm::Vec<T>::width;
  const int64_t whole = end / W * W;
  for (int64_t j = 0; j < whole; j += W) {
    typename small_gemm::Vec<T>::type x = small_gemm::load(row + j) - lse;
    if constexpr (std::is_same_v<T, float>) {
      x = exp_nonpositive(x);
    } else {
      for (int i = 0; i < W; ++i) x[i] = std::exp(x[i]);
    }
    small_gemm::store(row + j, x);
  }
  for (int64_t j = whole; j < end; ++j) row[j] = std::exp(row[j] - lse);
  for (int64_t j = end; j < ld; ++j) row[j] = T(0);
}

// sum_d a[d] b[d] over D (a multiple of the vector width), in vectors.
template <typename T>
ROFORMER_ALWAYS_INLINE T dot(const T* a, const T* b, int64_t D) {
  typename small_gemm::Vec<T>::type acc{};
  for (int64_t d = 0; d < D; d += small_gemm::Vec<T>::width) acc += small_gemm::load(a + d) * small_gemm::load(b + d);
  T sum = 0;
  for (int i = 0; i < small_gemm::Vec<T>::width; ++i) sum += acc[i];
  return sum;
}

// One thread's buffers: two transposed operands [D x L] (k, and v in the backward), four
// operands' rows packed [S x D] (a strided one, e.g. a head of a fused QKV projection 3 H D floats
// apart, would map its rows onto few cache sets), the backward's dk and dv summed over the blocks
// [S x D] and a block's dq [rows x D], two blocks of scores [rows x L] (probabilities; the
// backward's dscores) and, with CoPE's term, two more (the backward's gates and positions of every
// row, then the term's gradient) and the term's row buffers.
template <typename T>
struct Workspace {
  T* transposed[2];
  T* packed[4];
  T* accumulated[2];
  T* block_grad;
  T* square[4];
  cope_rows::Scratch<T>* cope;
};

// Row i of `pair` in a [B * H, S, P] CoPE table (launch.cope_at_integers or its gradient).
template <typename T>
ROFORMER_ALWAYS_INLINE T* cope_row(const ShortAttentionLaunch& p, const void* table, int64_t pair, int64_t i) {
  return static_cast<T*>(const_cast<void*>(table)) + (pair * p.seq + i) * p.cope_positions;
}

// row[j] += CoPE's term of row[0, end) (the scores of query i), when the launch has the term;
// the row's gates and positions into `gates` and `positions` (L each) when not null.
template <typename T>
ROFORMER_ALWAYS_INLINE void add_cope_term(const ShortAttentionLaunch& p, int64_t pair, int64_t i, T* row,
                                          const Workspace<T>& w, T* gates = nullptr, T* positions = nullptr) {
  if (p.cope_at_integers == nullptr) return;
  cope_rows::forward</*kAdd=*/true>(row, row_end(p, i), cope_row<const T>(p, p.cope_at_integers, pair, i),
                                    p.cope_positions, gates != nullptr ? gates : w.cope->gates.data(), row, positions);
}

// row[j] += the relative bias of offset j - i for j < row_end (query i), when the launch has one.
template <typename T>
ROFORMER_ALWAYS_INLINE void add_relative_bias(const ShortAttentionLaunch& p, int64_t pair, int64_t i, T* row) {
  if (p.rel_bias == nullptr) return;
  const T* at_offset = static_cast<const T*>(p.rel_bias) + (pair % p.heads) * (2 * p.seq - 1) + (p.seq - 1 - i);
  const int64_t end = row_end(p, i);
  for (int64_t j = 0; j < end; ++j) row[j] += at_offset[j];
}

// Which third of a fused projection an operand is (its bias rows, and whether it rotates), or
// none (the output's gradient).
enum class Part { q = 0, k = 1, v = 2, none = 3 };

ROFORMER_ALWAYS_INLINE bool rotates(const ShortAttentionLaunch& p, Part part) {
  return p.rotation != nullptr && (part == Part::q || part == Part::k);
}

template <typename T>
ROFORMER_ALWAYS_INLINE const T* bias_of(const ShortAttentionLaunch& p, int64_t pair, Part part) {
  if (p.bias == nullptr || part == Part::none) return nullptr;
  return static_cast<const T*>(p.bias) + (static_cast<int64_t>(part) * p.heads + pair % p.heads) * p.head_dim;
}

// A feature's rotation partner: d ^ 1 for interleaved pairs, else d +- D/2.
ROFORMER_ALWAYS_INLINE int64_t partner(const ShortAttentionLaunch& p, int64_t d) {
  const int64_t half = p.head_dim / 2;
  return p.interleaved ? d ^ 1 : (d < half ? d + half : d - half);
}

// Each feature's rotation partner, as a vector: x[d ^ 1] for interleaved pairs (lanes swapped
// within the vector), else x[d +- D/2] (the vector half a head away; D/2 a multiple of the width).
template <typename T>
ROFORMER_ALWAYS_INLINE typename small_gemm::Vec<T>::type partner_of(const ShortAttentionLaunch& p, const T* row,
                                                                    int64_t d) {
  if (p.interleaved) {
    typedef std::conditional_t<sizeof(T) == 4, int32_t, int64_t> index_t;
    typedef index_t mask_t __attribute__((vector_size(32)));
    mask_t swap;
    for (int i = 0; i < small_gemm::Vec<T>::width; ++i) swap[i] = i ^ 1;
    return __builtin_shuffle(small_gemm::load(row + d), swap);
  }
  return small_gemm::load(row + partner(p, d));  // the vector at d starts a run of W within one half
}

// Whether the rotation runs in vectors: interleaved pairs always, halves when D/2 is whole vectors.
ROFORMER_ALWAYS_INLINE bool partner_vectors(const ShortAttentionLaunch& p, int width) {
  return p.interleaved || (p.head_dim / 2) % width == 0;
}

// rows[j][d] = x[d] cos[j][d] + x[partner(d)] sin[j][d] for the S rows x = rows[j] (packed, D per row).
template <typename T>
ROFORMER_ALWAYS_INLINE void rotate_rows(const ShortAttentionLaunch& p, T* rows) {
  constexpr int W = small_gemm::Vec<T>::width;
  const int64_t S = p.seq, D = p.head_dim;
  const T* cos = static_cast<const T*>(p.rotation);
  const T* sin = cos + S * D;
  T x[kShortAttentionKernelMaxHeadDim];  // one row
  for (int64_t j = 0; j < S; ++j) {
    T* row = rows + j * D;
    std::memcpy(x, row, D * sizeof(T));
    const T* c = cos + j * D;
    const T* s = sin + j * D;
    if (partner_vectors(p, W)) {
      for (int64_t d = 0; d < D; d += W)
        small_gemm::store(
            row + d, small_gemm::load(x + d) * small_gemm::load(c + d) + partner_of(p, x, d) * small_gemm::load(s + d));
    } else {
      for (int64_t d = 0; d < D; ++d) row[d] = x[d] * c[d] + x[partner(p, d)] * s[d];
    }
  }
}

// dst[j * D + d] = src row j, column d: the pair's rows, contiguous; plus the projection's bias
// and, for q and k, the rotation, when the launch has them.
template <typename T>
ROFORMER_ALWAYS_INLINE Rows<const T> pack_rows(const ShortAttentionLaunch& p, const AttentionOperand& t, int64_t pair,
                                               Part part, T* dst) {
  constexpr int W = small_gemm::Vec<T>::width;  // D is a multiple of it
  const int64_t S = p.seq, D = p.head_dim;
  const Rows<const T> src = rows_of<const T>(t, pair, p.heads);
  const T* bias = bias_of<T>(p, pair, part);
  for (int64_t j = 0; j < S; ++j)
    for (int64_t d = 0; d < D; d += W) {
      typename small_gemm::Vec<T>::type x = small_gemm::load(src.data + j * src.stride + d);
      if (bias != nullptr) x += small_gemm::load(bias + d);
      small_gemm::store(dst + j * D + d, x);
    }
  if (rotates(p, part)) rotate_rows(p, dst);
  return {dst, D};
}

// The gradient of rows [j0, j0 + count) before their rotation: dst row j = dy[e] cos[j][e] +
// dy[partner(e)] sin[j][partner(e)] (the transpose of the rotation), dy = src row j - j0 (packed);
// or src itself when `part` does not rotate. Adds each column's sum to `sums` when not null.
template <typename T>
ROFORMER_ALWAYS_INLINE void write_grad_rows(const ShortAttentionLaunch& p, const T* src, Part part, Rows<T> dst,
                                            T* sums, int64_t j0, int64_t count) {
  constexpr int W = small_gemm::Vec<T>::width;
  const int64_t S = p.seq, D = p.head_dim;
  const bool rotated = rotates(p, part);
  const T* cos = static_cast<const T*>(p.rotation);
  const T* sin = rotated ? cos + S * D : nullptr;
  T scaled[kShortAttentionKernelMaxHeadDim];  // dy sin, one row
  for (int64_t j = j0; j < j0 + count; ++j) {
    const T* dy = src + (j - j0) * D;
    T* row = dst.data + j * dst.stride;
    if (rotated && partner_vectors(p, W)) {
      for (int64_t d = 0; d < D; d += W)
        small_gemm::store(scaled + d, small_gemm::load(dy + d) * small_gemm::load(sin + j * D + d));
      for (int64_t d = 0; d < D; d += W)
        small_gemm::store(row + d,
                          small_gemm::load(dy + d) * small_gemm::load(cos + j * D + d) + partner_of(p, scaled, d));
    } else if (rotated) {
      for (int64_t e = 0; e < D; ++e) {
        const int64_t pe = partner(p, e);
        row[e] = dy[e] * cos[j * D + e] + dy[pe] * sin[j * D + pe];
      }
    } else {
      for (int64_t d = 0; d < D; d += W) small_gemm::store(row + d, small_gemm::load(dy + d));
    }
    if (sums != nullptr)
      for (int64_t d = 0; d < D; d += W)
        small_gemm::store(sums + d, small_gemm::load(sums + d) + small_gemm::load(row + d));
  }
}

// The [D] row of launch.grad_bias for `pair` and `part` (zeroed by the caller), or null.
template <typename T>
ROFORMER_ALWAYS_INLINE T* grad_bias_of(const ShortAttentionLaunch& p, int64_t pair, Part part) {
  if (p.grad_bias == nullptr) return nullptr;
  const int64_t b = pair / p.heads, h = pair % p.heads;
  return static_cast<T*>(p.grad_bias) + ((b * 3 + static_cast<int64_t>(part)) * p.heads + h) * p.head_dim;
}

// Asks the caches for row i of `pair` in each operand, one row per row of softmax (a burst of
// every row at once stalled on the few outstanding misses a core tracks). Reading (kWrite false):
// the next pair's inputs, which then arrive while this one computes. Writing: this pair's output
// or gradient rows, stored later in the pair; a run of stores to lines not yet in cache fills the
// core's store buffer and stalls it (the projection gradient's stores had taken a fifth of the
// backward's time).
template <typename T, bool kWrite>
ROFORMER_ALWAYS_INLINE void prefetch_row(const ShortAttentionLaunch& p, int64_t pair, int64_t i,
                                         std::initializer_list<const AttentionOperand*> operands) {
  const int64_t bytes = p.head_dim * static_cast<int64_t>(sizeof(T));
  for (const AttentionOperand* t : operands) {
    const char* row = reinterpret_cast<const char*>(rows_of<const T>(*t, pair, p.heads).data + i * t->stride[2]);
    for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b, kWrite ? 1 : 0);
  }
}

// A pair's query rows go in blocks, each block's scores [rows, L] in the thread's buffers: the
// whole square up to kWholeSquareScores (it stays in this CPU's 2 MiB L2 cache), then blocks of
// kBlockScores (a 1024-token square is 4 MiB: read back from L3, RoPE had trained at 0.75-0.87x
// SDPA's speed). Each row's softmax is still exact: a block holds whole rows.
constexpr int64_t kWholeSquareScores = 512 * 512;
constexpr int64_t kBlockScores = 128 * 1024;

ROFORMER_ALWAYS_INLINE int64_t block_rows(const ShortAttentionLaunch& p) {
  if (p.seq * p.padded_seq <= kWholeSquareScores) return p.seq;
  return std::max<int64_t>(16, kBlockScores / p.padded_seq);
}

// The columns the block of rows ending at i1 reads: every key, or for causal pairs the keys up to
// its last row, rounded up to the kernel's 16. The products that sum over them stop at the last
// key (block_keys): the packed rows past it hold another call's data.
ROFORMER_ALWAYS_INLINE int64_t block_columns(const ShortAttentionLaunch& p, int64_t i1) {
  return p.causal ? std::min(p.padded_seq, (i1 + 15) / 16 * 16) : p.padded_seq;
}
ROFORMER_ALWAYS_INLINE int64_t block_keys(const ShortAttentionLaunch& p, int64_t i1) {
  return p.causal ? i1 : p.seq;
}

// scores = q (scale k)^T of rows [i0, i1) into `scores` (L per row, `cols` of them written),
// kt = (scale k)^T [D, L]: the forward's first product, and the backward's again.
template <int kBytes, typename T>
ROFORMER_ALWAYS_INLINE void block_scores(const ShortAttentionLaunch& p, Rows<const T> q, const T* kt, int64_t i0,
                                         int64_t i1, int64_t cols, T* scores) {
  small_gemm::gemm<T, false, kBytes>(i1 - i0, cols, p.head_dim, Strided<T>{q.data + i0 * q.stride, q.stride, 1}, kt,
                                     p.padded_seq, scores, p.padded_seq,
                                     p.causal ? Limit::columns_to_row_end : Limit::none, i0);
}

template <typename T, int kBytes>
ROFORMER_ALWAYS_INLINE void forward_pair(const ShortAttentionLaunch& p, int64_t pair, const Workspace<T>& w) {
  const int64_t S = p.seq, D = p.head_dim, L = p.padded_seq;
  const Rows<const T> q = pack_rows(p, p.q, pair, Part::q, w.packed[0]);
  const Rows<const T> k = pack_rows(p, p.k, pair, Part::k, w.packed[1]);
  const Rows<const T> v = pack_rows(p, p.v, pair, Part::v, w.packed[2]);
  const Rows<T> out = rows_of<T>(p.out, pair, p.heads);
  T* probs = w.square[0];
  T* lse = p.lse != nullptr ? static_cast<T*>(p.lse) + pair * S : nullptr;
  transpose_padded(k, S, D, L, static_cast<T>(p.scale), w.transposed[0]);
  const bool next = pair + 1 < p.batch * p.heads;
  for (int64_t i0 = 0, step = block_rows(p); i0 < S; i0 += step) {
    const int64_t i1 = std::min(S, i0 + step), cols = block_columns(p, i1);
    block_scores<kBytes>(p, q, w.transposed[0], i0, i1, cols, probs);
    for (int64_t i = i0; i < i1; ++i) {
      if (next) prefetch_row<T, false>(p, pair + 1, i, {&p.q, &p.k, &p.v});
      prefetch_row<T, true>(p, pair, i, {&p.out});
      T* row = probs + (i - i0) * L;
      add_cope_term(p, pair, i, row, w);
      add_relative_bias(p, pair, i, row);
      const T row_lse = softmax_row(row, row_end(p, i), cols);
      if (lse != nullptr) lse[i] = row_lse;
    }
    small_gemm::gemm<T, false, kBytes>(i1 - i0, D, block_keys(p, i1), Strided<T>{probs, L, 1}, v.data, v.stride,
                                       out.data + i0 * out.stride, out.stride,
                                       p.causal ? Limit::sum_to_row_end : Limit::none, i0);
  }
}

// The probabilities of rows [i0, i1) again, from their scores and log-sum-exp (CoPE's gates and
// positions kept for its gradient).
template <typename T>
ROFORMER_ALWAYS_INLINE void block_probs(const ShortAttentionLaunch& p, int64_t pair, int64_t i0, int64_t i1,
                                        int64_t cols, const Workspace<T>& w) {
  const int64_t L = p.padded_seq;
  const T* lse = static_cast<const T*>(p.lse) + pair * p.seq;
  const bool next = pair + 1 < p.batch * p.heads;
  for (int64_t i = i0; i < i1; ++i) {
    if (next) prefetch_row<T, false>(p, pair + 1, i, {&p.q, &p.k, &p.v, &p.grad_out});
    prefetch_row<T, true>(p, pair, i, {&p.grad_v});
    T* row = w.square[0] + (i - i0) * L;
    if (p.cope_at_integers != nullptr)
      add_cope_term(p, pair, i, row, w, w.square[2] + (i - i0) * L, w.square[3] + (i - i0) * L);
    add_relative_bias(p, pair, i, row);
    probs_from_lse(row, row_end(p, i), cols, lse[i]);
  }
}

// d scores of rows [i0, i1) in place of their d probs: probs (dprobs - rowsum(probs . dprobs)),
// through the term's gradient where there is one, times the scale; the relative bias's gradient
// summed by offset on the way.
template <typename T>
ROFORMER_ALWAYS_INLINE void block_dscores(const ShortAttentionLaunch& p, int64_t pair, int64_t i0, int64_t i1,
                                          int64_t cols, const Workspace<T>& w) {
  const int64_t S = p.seq, L = p.padded_seq;
  const T scale = static_cast<T>(p.scale);
  for (int64_t i = i0; i < i1; ++i) {
    const T* pr = w.square[0] + (i - i0) * L;
    T* row = w.square[1] + (i - i0) * L;
    const int64_t end = row_end(p, i);
    prefetch_row<T, true>(p, pair, i, {&p.grad_q, &p.grad_k});
    // sum_j probs_ij dprobs_ij (= dout_i . out_i) over whole vectors: the products computed every
    // column of them, and probs is zero past `end`
    const int64_t W = small_gemm::Vec<T>::width;
    const T delta = dot(pr, row, (end + W - 1) / W * W);
    if (p.grad_rel_bias != nullptr) {  // d logits sum into the bias of their offset j - i
      T* by_offset = static_cast<T*>(p.grad_rel_bias) + pair * (2 * S - 1) + (S - 1 - i);
      for (int64_t j = 0; j < end; ++j) {
        const T d_logit = pr[j] * (row[j] - delta);
        by_offset[j] += d_logit;
        row[j] = d_logit * scale;
      }
    } else if (p.cope_at_integers == nullptr) {
      for (int64_t j = 0; j < end; ++j) row[j] = pr[j] * (row[j] - delta) * scale;
    } else {  // d logits, then through CoPE's term: d scores = d logits + d term / d scores
      for (int64_t j = 0; j < end; ++j) row[j] = pr[j] * (row[j] - delta);
      T* through = w.square[3] + (i - i0) * L;  // the positions, overwritten by d scores through the term
      cope_rows::backward_from(w.square[2] + (i - i0) * L, through, end,
                               cope_row<const T>(p, p.cope_at_integers, pair, i), p.cope_positions, row, *w.cope,
                               through, cope_row<T>(p, p.grad_cope_at_integers, pair, i));
      for (int64_t j = 0; j < end; ++j) row[j] = (row[j] + through[j]) * scale;
    }
    for (int64_t j = end; j < cols; ++j) row[j] = T(0);
  }
}

// Where the products may write the gradient rows of `part` themselves (no rotation to undo, no
// bias sums): those rows; else `scratch`, D per row, for finish_grad.
template <typename T>
ROFORMER_ALWAYS_INLINE Rows<T> grad_target(const ShortAttentionLaunch& p, int64_t pair, Part part,
                                           const AttentionOperand& grad, T* scratch) {
  if (rotates(p, part) || grad_bias_of<T>(p, pair, part) != nullptr) return {scratch, p.head_dim};
  return rows_of<T>(grad, pair, p.heads);
}

// Writes rows [j0, j0 + count) of `part`'s gradient from `scratch` unless the products wrote them.
template <typename T>
ROFORMER_ALWAYS_INLINE void finish_grad(const ShortAttentionLaunch& p, int64_t pair, Part part,
                                        const AttentionOperand& grad, Rows<T> target, const T* scratch, int64_t j0,
                                        int64_t count) {
  if (target.data != scratch) return;
  write_grad_rows(p, scratch, part, rows_of<T>(grad, pair, p.heads), grad_bias_of<T>(p, pair, part), j0, count);
}

// C (+)= A B for the key rows of dk or dv from the block of query rows at i0: the first block
// writes every key row (zeros where causality leaves it none), the later ones add to theirs.
template <int kBytes, typename T>
ROFORMER_ALWAYS_INLINE void key_grad_product(const ShortAttentionLaunch& p, int64_t i0, int64_t i1, Strided<T> a,
                                             const T* b, int64_t ldb, Rows<T> c) {
  const int64_t D = p.head_dim;
  const Limit from = p.causal ? Limit::sum_from_row : Limit::none;
  if (i0 == 0)
    small_gemm::gemm<T, false, kBytes>(p.seq, D, i1, a, b, ldb, c.data, c.stride, from, 0);
  else
    small_gemm::gemm<T, true, kBytes>(p.causal ? i1 : p.seq, D, i1 - i0, a, b + i0 * ldb, ldb, c.data, c.stride, from,
                                      -i0);
}

// Per block of query rows: its probabilities again, dv += probs^T dout, dprobs = dout v^T, its d
// scores, dq = ds k (its rows written), dk += ds^T q; dk and dv are written after the last block.
template <typename T, int kBytes>
ROFORMER_ALWAYS_INLINE void backward_pair(const ShortAttentionLaunch& p, int64_t pair, const Workspace<T>& w) {
  const int64_t S = p.seq, D = p.head_dim, L = p.padded_seq;
  const Rows<const T> q = pack_rows(p, p.q, pair, Part::q, w.packed[0]);
  const Rows<const T> k = pack_rows(p, p.k, pair, Part::k, w.packed[1]);
  const Rows<const T> dout = pack_rows(p, p.grad_out, pair, Part::none, w.packed[2]);
  transpose_padded(k, S, D, L, static_cast<T>(p.scale), w.transposed[0]);
  transpose_padded(pack_rows(p, p.v, pair, Part::v, w.packed[3]), S, D, L, T(1), w.transposed[1]);
  T* probs = w.square[0];
  T* ds = w.square[1];
  const Rows<T> dq = grad_target(p, pair, Part::q, p.grad_q, w.block_grad);
  const Rows<T> dk = grad_target(p, pair, Part::k, p.grad_k, w.accumulated[0]);
  const Rows<T> dv = grad_target(p, pair, Part::v, p.grad_v, w.accumulated[1]);
  for (int64_t i0 = 0, step = block_rows(p); i0 < S; i0 += step) {
    const int64_t i1 = std::min(S, i0 + step), rows = i1 - i0, cols = block_columns(p, i1);
    block_scores<kBytes>(p, q, w.transposed[0], i0, i1, cols, probs);
    block_probs(p, pair, i0, i1, cols, w);
    key_grad_product<kBytes>(p, i0, i1, Strided<T>{probs, 1, L}, dout.data, D, dv);
    small_gemm::gemm<T, false, kBytes>(rows, cols, D, Strided<T>{dout.data + i0 * D, D, 1}, w.transposed[1], L, ds, L,
                                       p.causal ? Limit::columns_to_row_end : Limit::none, i0);
    block_dscores(p, pair, i0, i1, cols, w);
    T* dq_rows = dq.data == w.block_grad ? dq.data : dq.data + i0 * dq.stride;
    small_gemm::gemm<T, false, kBytes>(rows, D, block_keys(p, i1), Strided<T>{ds, L, 1}, k.data, k.stride, dq_rows,
                                       dq.stride, p.causal ? Limit::sum_to_row_end : Limit::none, i0);
    finish_grad(p, pair, Part::q, p.grad_q, dq, w.block_grad, i0, rows);
    key_grad_product<kBytes>(p, i0, i1, Strided<T>{ds, 1, L}, q.data, q.stride, dk);
  }
  finish_grad(p, pair, Part::v, p.grad_v, dv, w.accumulated[1], 0, S);
  finish_grad(p, pair, Part::k, p.grad_k, dk, w.accumulated[0], 0, S);
}

// Pairs [begin, end) with this thread's buffers, one function per dtype and direction: with
// 32-byte vectors compiled per x86-64 level (ROFORMER_CLONES), and (`_wide`) with 64-byte vectors
// for x86-64-v4 alone, which short_attention_*_cpu take where ops::cpu_vector_bytes() says 64.
#define ROFORMER_SHORT_PAIRS(name, T, pair_fn)                                                                  \
  ROFORMER_CLONES void name(const ShortAttentionLaunch& p, int64_t begin, int64_t end, const Workspace<T>& w) { \
    for (int64_t pair = begin; pair < end; ++pair) pair_fn<T, 32>(p, pair, w);                                  \
  }                                                                                                             \
  ROFORMER_WIDE_TARGET void name##_wide(const ShortAttentionLaunch& p, int64_t begin, int64_t end,              \
                                        const Workspace<T>& w) {                                                \
    for (int64_t pair = begin; pair < end; ++pair) pair_fn<T, ROFORMER_WIDE_VECTORS ? 64 : 32>(p, pair, w);     \
  }
ROFORMER_SHORT_PAIRS(forward_pairs_f32, float, forward_pair)
ROFORMER_SHORT_PAIRS(forward_pairs_f64, double, forward_pair)
ROFORMER_SHORT_PAIRS(backward_pairs_f32, float, backward_pair)
ROFORMER_SHORT_PAIRS(backward_pairs_f64, double, backward_pair)

// Runs fn(begin, end, workspace) over the pairs in parallel, one workspace per thread. The threads
// claim kPairsPerClaim pairs at a time from a shared counter rather than a fixed half each: a
// thread slowed by a neighbour or by its core's other work then takes fewer pairs instead of
// keeping the others waiting at the region's end. Each pair is still computed whole by one
// thread, so the results do not depend on who took it.
constexpr int64_t kPairsPerClaim = 2;

template <typename T, typename Fn>
void over_pairs(const ShortAttentionLaunch& p, Fn fn) {
  const int64_t S = p.seq, D = p.head_dim, L = p.padded_seq;
  for_each_claim(p.batch * p.heads, kPairsPerClaim, [&](int64_t first, int64_t last) {
    // Kept per thread between calls (about 3 MiB at S = 512 and 5 MiB at 2048 with D = 64): a fresh one
    // per call would cost page faults, which the threads take one at a time.
    thread_local std::vector<T> buffer;
    thread_local cope_rows::Scratch<T> cope;
    const int64_t R = block_rows(p), squares = p.cope_at_integers != nullptr ? 4 : 2;
    buffer.resize(std::max(buffer.size(), static_cast<size_t>(2 * D * L + 6 * S * D + R * D + squares * R * L)));
    if (p.cope_at_integers != nullptr) cope.reserve(S, p.cope_positions);
    T* b = buffer.data();
    T* rows = b + 2 * D * L;  // the six [S, D] buffers, then a block's dq
    T* square = rows + 6 * S * D + R * D;
    const Workspace<T> w{{b, b + D * L},
                         {rows, rows + S * D, rows + 2 * S * D, rows + 3 * S * D},
                         {rows + 4 * S * D, rows + 5 * S * D},
                         rows + 6 * S * D,
                         {square, square + R * L, squares == 4 ? square + 2 * R * L : nullptr,
                          squares == 4 ? square + 3 * R * L : nullptr},
                         &cope};
    fn(first, last, w);
  });
}

}  // namespace

void short_attention_forward_cpu(const ShortAttentionLaunch& p) {
  const bool wide = cpu_vector_bytes() == 64;
  if (p.dtype == KernelDType::f64) {
    over_pairs<double>(p, [&](int64_t b, int64_t e, const auto& w) {
      (wide ? forward_pairs_f64_wide : forward_pairs_f64)(p, b, e, w);
    });
  } else {
    over_pairs<float>(p, [&](int64_t b, int64_t e, const auto& w) {
      (wide ? forward_pairs_f32_wide : forward_pairs_f32)(p, b, e, w);
    });
  }
}

void short_attention_backward_cpu(const ShortAttentionLaunch& p) {
  const bool wide = cpu_vector_bytes() == 64;
  if (p.dtype == KernelDType::f64) {
    over_pairs<double>(p, [&](int64_t b, int64_t e, const auto& w) {
      (wide ? backward_pairs_f64_wide : backward_pairs_f64)(p, b, e, w);
    });
  } else {
    over_pairs<float>(p, [&](int64_t b, int64_t e, const auto& w) {
      (wide ? backward_pairs_f32_wide : backward_pairs_f32)(p, b, e, w);
    });
  }
}

}  // namespace roformer::ops
