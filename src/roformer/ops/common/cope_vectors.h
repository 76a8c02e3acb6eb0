// CoPE's per-key steps on whole vectors of keys (small_gemm.h's 32- or 64-byte vectors of W
// lanes), for the tile term's loops (ops/tile_attention/terms/cope_cpu.cpp): the gates' running
// sums as in-register scans, and the interpolation's two table reads as permutes of a window of
// the query's table row. A key's count differs from its neighbour's by one gate, below 1, so the
// W keys of a vector read at most W + 2 consecutive entries; two vectors of the row (2W entries)
// hold them. Where they do not (a NaN count, or a table shorter than 2W) the caller takes
// cope_math::interpolation key by key. Header-only and always inlined, so each ROFORMER_CLONES
// caller gets it compiled for its instruction set.
#pragma once

#include <cstdint>
#include <type_traits>

#include "roformer/ops/common/cpu_kernel_support.h"
#include "roformer/ops/common/small_gemm.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace roformer::ops::cope_vectors {

template <typename T, int kBytes>
struct Lanes {
  using vec = typename small_gemm::Vec<T, kBytes>::type;
  using index_t = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;  // a lane's width: what permutes take
  typedef index_t ivec __attribute__((vector_size(kBytes)));
  static constexpr int W = small_gemm::Vec<T, kBytes>::width;
};

template <typename T, int kBytes>
ROFORMER_ALWAYS_INLINE typename Lanes<T, kBytes>::vec broadcast(T x) {
  return typename Lanes<T, kBytes>::vec{} + x;
}

// The least (kLeast) or the greatest lane of v, in every lane: each step takes the extreme of
// lane c and lane c ^ kSpan.
template <bool kLeast, int kSpan, int kLanes, typename V>
ROFORMER_ALWAYS_INLINE V extreme_lane(V v) {
  if constexpr (kSpan >= kLanes) {
    return v;
  } else {
    V from;  // integer vectors are their own permute masks
#pragma GCC unroll 16
    for (int c = 0; c < kLanes; ++c) from[c] = c ^ kSpan;
    const V other = __builtin_shuffle(v, from);
    return extreme_lane<kLeast, 2 * kSpan, kLanes>(kLeast ? (other < v ? other : v) : (other > v ? other : v));
  }
}

// Lane c of v moved to lane c + shift (shift > 0: towards the last lane) or c + shift < 0 ...;
// lanes moved in from outside are 0.
template <int kShift, typename T, int kBytes>
ROFORMER_ALWAYS_INLINE typename Lanes<T, kBytes>::vec shifted(typename Lanes<T, kBytes>::vec v) {
  using L = Lanes<T, kBytes>;
  typename L::ivec from;
#pragma GCC unroll 16
  for (int c = 0; c < L::W; ++c) from[c] = (c - kShift >= 0 && c - kShift < L::W) ? c - kShift : L::W;
  return __builtin_shuffle(v, typename L::vec{}, from);
}

// out[c] = sum_{t <= c} v[t] (kForward) or sum_{t >= c} v[t], in log2(W) shifted adds.
template <bool kForward, typename T, int kBytes>
ROFORMER_ALWAYS_INLINE typename Lanes<T, kBytes>::vec running_sums(typename Lanes<T, kBytes>::vec v) {
  v += shifted < kForward ? 1 : -1, T, kBytes > (v);
  if constexpr (Lanes<T, kBytes>::W > 2) v += shifted < kForward ? 2 : -2, T, kBytes > (v);
  if constexpr (Lanes<T, kBytes>::W > 4) v += shifted < kForward ? 4 : -4, T, kBytes > (v);
  if constexpr (Lanes<T, kBytes>::W > 8) v += shifted < kForward ? 8 : -8, T, kBytes > (v);
  static_assert(Lanes<T, kBytes>::W <= 16, "vectors of at most 16 lanes");
  return v;
}

// Lanes c < n of `value`, the others of `kept`.
template <typename T, int kBytes>
ROFORMER_ALWAYS_INLINE typename Lanes<T, kBytes>::vec first_lanes(int64_t n, typename Lanes<T, kBytes>::vec value,
                                                                  typename Lanes<T, kBytes>::vec kept) {
  using L = Lanes<T, kBytes>;
  typename L::ivec lane;
#pragma GCC unroll 16
  for (int c = 0; c < L::W; ++c) lane[c] = c;
  return lane < static_cast<typename L::index_t>(n) ? value : kept;
}

// The interpolation of a table row at W counts (cope_math::interpolation's, lane by lane): the
// floor index, the upper weight, and the row's entries at the two indices.
template <typename T, int kBytes>
struct Interpolated {
  typename Lanes<T, kBytes>::ivec low;
  typename Lanes<T, kBytes>::vec w, at_low, at_high;
  // The term: a[ceil p] w + a[floor p] (1 - w).
  ROFORMER_ALWAYS_INLINE typename Lanes<T, kBytes>::vec term() const { return at_high * w + at_low * (T(1) - w); }
};

// Interpolates row a (positions entries) at the counts `raw`; false (out unset) where the lanes'
// indices do not fit one window of 2W entries of the row, or the row is shorter than that.
template <typename T, int kBytes>
ROFORMER_ALWAYS_INLINE bool interpolate(const T* a, int64_t positions, typename Lanes<T, kBytes>::vec raw,
                                        Interpolated<T, kBytes>& out) {
  using L = Lanes<T, kBytes>;
  using vec = typename L::vec;
  using ivec = typename L::ivec;
  constexpr int W = L::W;
  if (positions < 2 * W) return false;
  const vec zero{}, top = broadcast<T, kBytes>(static_cast<T>(positions - 1));
  const vec clamped = raw > zero ? (raw < top ? raw : top) : zero;  // NaN: 0
  const ivec low = __builtin_convertvector(clamped, ivec);          // clamped >= 0: the floor
  const vec w = clamped - __builtin_convertvector(low, vec);
  const ivec high = low - (w > zero);  // a true lane compares as -1
  const typename L::index_t first = extreme_lane<true, 1, W>(low)[0];
  const typename L::index_t last = extreme_lane<false, 1, W>(high)[0];
  if (last - first >= 2 * W) return false;
  const typename L::index_t start =
      first < positions - 2 * W ? first : static_cast<typename L::index_t>(positions - 2 * W);
  const vec lo = small_gemm::load<kBytes>(a + start), hi = small_gemm::load<kBytes>(a + start + W);
  out.low = low;
  out.w = raw == raw ? w : raw;  // NaN stays NaN, as the formula's would
  out.at_low = __builtin_shuffle(lo, hi, low - start);
  out.at_high = __builtin_shuffle(lo, hi, high - start);
  return true;
}

// Asks for the cache lines of entries [first, last] of a row of `positions` (clamped to the row)
// ahead of their use: a row's next tile of keys reads the entries next to where its count stopped.
template <typename T>
ROFORMER_ALWAYS_INLINE void prefetch_entries(const T* a, int64_t positions, int64_t first, int64_t last) {
  constexpr int64_t kLine = 64 / sizeof(T);
  first = first < 0 ? 0 : first;
  last = last >= positions ? positions - 1 : last;
  for (int64_t p = first / kLine * kLine; p <= last; p += kLine) __builtin_prefetch(a + p, 0, 3);
}

}  // namespace roformer::ops::cope_vectors

#pragma GCC diagnostic pop
