// FIRE's tile term in the CPU loop: between two consecutive kinks the MLP is one line per head,
// and a row's keys on one side of the query fall in each segment as one run of distances (x grows
// with the distance), so the term is a few vectorisable runs of slope * psi(d) / denominator +
// intercept; the runs' ends are the tables' bounds. Keys after the query (bidirectional) take the
// future side's tables the same way, their distance growing with the key.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>

#include "roformer/ops/tile_attention/terms/fire_kernel.h"
#include "roformer/ops/tile_attention/tile_attention_grad_loop.h"
#include "roformer/ops/tile_attention/tile_attention_loop.h"

namespace roformer::ops {
namespace fire_tiles {

// One side's tables, its head's slopes and intercepts picked by begin().
template <typename T>
struct Side {
  explicit Side(const FireSide& s)
      : tables(s),
        denominator(static_cast<const T*>(s.denominator)),
        bounds(s.bounds),
        kinks(s.kinks),
        all_slope(static_cast<const T*>(s.slope)),
        all_intercept(static_cast<const T*>(s.intercept)) {}
  ROFORMER_ALWAYS_INLINE void begin(int64_t pair, int64_t h) {
    if (all_slope == nullptr) return;
    slope = all_slope + h * (kinks + 1);
    intercept = all_intercept + h * (kinks + 1);
    this->pair = pair;
  }
  // Backward, after a row's runs: sum_a = sum a dS x and sum_p = sum a dS dpsi/dc over its keys on
  // this side reach c and the threshold through x = psi / den: dx/dc = (dpsi/dc - x dden/dc) / den,
  // dx/dthreshold = -x dden/dthreshold / den.
  ROFORMER_ALWAYS_INLINE void add_row_grads(int64_t i, double sum_a, double sum_p) {
    const double den = double(denominator[i]);
    tables.grad_c[pair] += (sum_p - sum_a * double(static_cast<const T*>(tables.denominator_by_c)[i])) / den;
    tables.grad_threshold[pair] -= sum_a * double(static_cast<const T*>(tables.denominator_by_threshold)[i]) / den;
  }
  // The segment's slope and intercept gradients, this pair's own.
  ROFORMER_ALWAYS_INLINE void add_segment_grads(int64_t s, double by_x, double by_1) {
    tables.grad_slope[pair * (kinks + 1) + s] += by_x;
    tables.grad_intercept[pair * (kinks + 1) + s] += by_1;
  }
  const FireSide& tables;
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
  int64_t pair = 0;  // the (batch, head) pair whose gradients the backward adds to
};

template <typename T, int kBytes = 32>
struct Fire {
  Fire(const TileAttentionLaunch& p, const void* tables_in)
      : heads(p.heads),
        psi(static_cast<const T*>(static_cast<const FireTables*>(tables_in)->psi)),
        psi_by_c(static_cast<const T*>(static_cast<const FireTables*>(tables_in)->psi_by_c)),
        past(static_cast<const FireTables*>(tables_in)->past),
        future(static_cast<const FireTables*>(tables_in)->future) {}
  ROFORMER_ALWAYS_INLINE void begin(int64_t b, int64_t h, int64_t, int64_t) {
    past.begin(b * heads + h, h);
    future.begin(b * heads + h, h);
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

  // ---- Backward: per segment run, sum dS x into the slope's gradient and sum dS into the
  // intercept's; per row, c's and the threshold's through x (FIRE's bias is added unscaled) ----
  ROFORMER_ALWAYS_INLINE void grad_begin() {}
  ROFORMER_ALWAYS_INLINE void grad_tile(const T*, int64_t) {}
  ROFORMER_ALWAYS_INLINE void grad_dp(int64_t, int64_t, int64_t, int64_t, T*) {}
  ROFORMER_ALWAYS_INLINE void grad_tile_end(int64_t, const T*, const T*, const T*, int64_t) {}
  ROFORMER_ALWAYS_INLINE void grad_end() {}
  ROFORMER_ALWAYS_INLINE void grad_row(int64_t, int64_t i, int64_t j0, int64_t n, const T* ds, const T*) {
    const int64_t before = std::clamp<int64_t>(i - j0 + 1, 0, n);
    if (before > 0) grad_past(i, j0, before, ds);
    if (before < n) grad_future(i, j0 + before, n - before, ds + before);
  }
  // The run [c_first, c_last] of segment s: its sums into the segment's gradients and the row's.
  ROFORMER_ALWAYS_INLINE void grad_run(Side<T>& side, int64_t s, const T* ds, const T* psi_at, const T* psi_by_c_at,
                                       int64_t step, int64_t c_first, int64_t c_last, T denom, double& sum_a,
                                       double& sum_p) {
    double by_x = 0, by_1 = 0, by_p = 0;
    for (int64_t c = c_first; c <= c_last; ++c) {
      const T x = psi_at[step * c] / denom;
      by_x += double(ds[c]) * double(x);
      by_1 += double(ds[c]);
      by_p += double(ds[c]) * double(psi_by_c_at[step * c]);
    }
    side.add_segment_grads(s, by_x, by_1);
    sum_a += double(side.slope[s]) * by_x;
    sum_p += double(side.slope[s]) * by_p;
  }
  ROFORMER_ALWAYS_INLINE void grad_past(int64_t i, int64_t j0, int64_t n, const T* ds) {
    const T denom = past.denominator[i];
    const int64_t d_low = i - (j0 + n - 1), d_high = i - j0;
    double sum_a = 0, sum_p = 0;
    for (int64_t d = d_low, s = past.segment(i, d_low); d <= d_high; ++s) {
      const int64_t d_end = past.segment_end(i, s, d_high + 1);
      if (d_end > d)
        grad_run(past, s, ds, psi + (i - j0), psi_by_c + (i - j0), -1, i - (d_end - 1) - j0, i - d - j0, denom, sum_a,
                 sum_p);
      d = std::max(d, d_end);
    }
    past.add_row_grads(i, sum_a, sum_p);
  }
  ROFORMER_ALWAYS_INLINE void grad_future(int64_t i, int64_t j0, int64_t n, const T* ds) {
    const T denom = future.denominator[i];
    const int64_t e_low = j0 - i, e_high = j0 + n - 1 - i;
    double sum_a = 0, sum_p = 0;
    for (int64_t e = e_low, s = future.segment(i, e_low); e <= e_high; ++s) {
      const int64_t e_end = future.segment_end(i, s, e_high + 1);
      if (e_end > e)
        grad_run(future, s, ds, psi + (j0 - i), psi_by_c + (j0 - i), 1, e - e_low, e_end - e_low - 1, denom, sum_a,
                 sum_p);
      e = std::max(e, e_end);
    }
    future.add_row_grads(i, sum_a, sum_p);
  }

  int64_t heads;
  const T* psi;
  const T* psi_by_c;
  Side<T> past, future;
};

}  // namespace fire_tiles

ROFORMER_TILE_TERM_ITEMS(fire_items, fire_tiles::Fire)
ROFORMER_TILE_TERM_GRAD_PAIRS(fire_grad_pairs, fire_tiles::Fire)

}  // namespace roformer::ops
