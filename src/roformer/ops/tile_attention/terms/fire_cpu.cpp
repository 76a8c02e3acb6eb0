// FIRE's tile term in the CPU loop: between two consecutive kinks the MLP is one line per head,
// and a row's keys on one side of the query fall in each segment as one run of distances (x grows
// with the distance), so the term is a few vectorisable runs of slope * psi(d) / denominator +
// intercept; the runs' ends are the tables' bounds. Keys after the query (bidirectional) take the
// future side's tables the same way, their distance growing with the key.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>

#include "roformer/ops/tile_attention/terms/fire_kernel.h"
#include "roformer/ops/tile_attention/tile_attention_loop.h"

namespace roformer::ops {
namespace fire_tiles {

// One side's tables, its head's slopes and intercepts picked by begin().
template <typename T>
struct Side {
  explicit Side(const FireSide& s)
      : denominator(static_cast<const T*>(s.denominator)),
        bounds(s.bounds),
        kinks(s.kinks),
        all_slope(static_cast<const T*>(s.slope)),
        all_intercept(static_cast<const T*>(s.intercept)) {}
  ROFORMER_ALWAYS_INLINE void begin(int64_t h) {
    if (all_slope == nullptr) return;
    slope = all_slope + h * (kinks + 1);
    intercept = all_intercept + h * (kinks + 1);
  }
  // The first segment holding distance d of row i.
  ROFORMER_ALWAYS_INLINE int64_t segment(int64_t i, int64_t d) const {
    const int64_t* bound = bounds + i * kinks;
    int64_t s = 0;
    while (s < kinks && bound[s] <= d) ++s;
    return s;
  }
  // Where segment s of row i ends (its first distance past it), capped at `cap`.
  ROFORMER_ALWAYS_INLINE int64_t segment_end(int64_t i, int64_t s, int64_t cap) const {
    return std::min(cap, s < kinks ? bounds[i * kinks + s] : cap);
  }
  const T* denominator;
  const int64_t* bounds;
  int64_t kinks;
  const T* all_slope;
  const T* all_intercept;
  const T* slope = nullptr;
  const T* intercept = nullptr;
};

template <typename T, int kBytes = 32>
struct Fire {
  Fire(const TileAttentionLaunch&, const void* tables_in)
      : psi(static_cast<const T*>(static_cast<const FireTables*>(tables_in)->psi)),
        past(static_cast<const FireTables*>(tables_in)->past),
        future(static_cast<const FireTables*>(tables_in)->future) {}
  ROFORMER_ALWAYS_INLINE void begin(int64_t, int64_t h, int64_t, int64_t) {
    past.begin(h);
    future.begin(h);
  }
  ROFORMER_ALWAYS_INLINE void tile(int64_t, int64_t) {}
  ROFORMER_ALWAYS_INLINE void output(int64_t, T*, T*) {}
  ROFORMER_ALWAYS_INLINE void add(int64_t, int64_t i, int64_t j0, int64_t n, T* row) {
    const int64_t before = std::clamp<int64_t>(i - j0 + 1, 0, n);  // keys j0 + c <= i
    if (before > 0) add_past(i, j0, before, row);
    if (before < n) add_future(i, j0 + before, n - before, row + before);
  }
  // Keys [j0, j0 + n), all at or before query i: distances d = i - j fall as the key grows.
  ROFORMER_ALWAYS_INLINE void add_past(int64_t i, int64_t j0, int64_t n, T* row) {
    const T denom = past.denominator[i];
    const T* psi_back = psi + (i - j0);                       // psi_back[-c] = psi(i - (j0 + c))
    const int64_t d_low = i - (j0 + n - 1), d_high = i - j0;  // the keys' distances, inclusive
    for (int64_t d = d_low, s = past.segment(i, d_low); d <= d_high; ++s) {
      const int64_t d_end = past.segment_end(i, s, d_high + 1);  // segment s: [d, d_end)
      const T a = past.slope[s], b = past.intercept[s];
      const int64_t c_first = i - (d_end - 1) - j0, c_last = i - d - j0;
      for (int64_t c = c_first; c <= c_last; ++c) row[c] += a * (psi_back[-c] / denom) + b;
      d = std::max(d, d_end);
    }
  }
  // Keys [j0, j0 + n), all after query i: distances e = j - i grow with the key.
  ROFORMER_ALWAYS_INLINE void add_future(int64_t i, int64_t j0, int64_t n, T* row) {
    const T denom = future.denominator[i];
    const T* psi_ahead = psi + (j0 - i);                    // psi_ahead[c] = psi(j0 + c - i)
    const int64_t e_low = j0 - i, e_high = j0 + n - 1 - i;  // the keys' distances, inclusive
    for (int64_t e = e_low, s = future.segment(i, e_low); e <= e_high; ++s) {
      const int64_t e_end = future.segment_end(i, s, e_high + 1);  // segment s: [e, e_end)
      const T a = future.slope[s], b = future.intercept[s];
      for (int64_t c = e - e_low; c < e_end - e_low; ++c) row[c] += a * (psi_ahead[c] / denom) + b;
      e = std::max(e, e_end);
    }
  }
  const T* psi;
  Side<T> past, future;
};

}  // namespace fire_tiles

ROFORMER_TILE_TERM_ITEMS(fire_items, fire_tiles::Fire)

}  // namespace roformer::ops
