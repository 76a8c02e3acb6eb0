// FIRE's tile term in the CPU loop: between two consecutive kinks the MLP is one line per head,
// and a row's keys fall in each segment as one run of distances (x grows with the distance), so
// the term is a few vectorisable runs of slope * psi(d) / denominator + intercept; the runs' ends
// are the tables' bounds.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>

#include "roformer/ops/tile_attention/terms/fire_kernel.h"
#include "roformer/ops/tile_attention/tile_attention_loop.h"

namespace roformer::ops {
namespace fire_tiles {

template <typename T>
struct Fire {
  Fire(const TileAttentionLaunch&, const void* tables_in) {
    const auto& t = *static_cast<const FireTables*>(tables_in);
    psi = static_cast<const T*>(t.psi);
    denominator = static_cast<const T*>(t.denominator);
    bounds = t.bounds;
    kinks = t.kinks;
    all_slope = static_cast<const T*>(t.slope);
    all_intercept = static_cast<const T*>(t.intercept);
  }
  ROFORMER_ALWAYS_INLINE void begin(int64_t, int64_t h, int64_t, int64_t) {
    slope = all_slope + h * (kinks + 1);
    intercept = all_intercept + h * (kinks + 1);
  }
  ROFORMER_ALWAYS_INLINE void tile(int64_t, int64_t) {}
  ROFORMER_ALWAYS_INLINE void output(int64_t, T*, T*) {}
  ROFORMER_ALWAYS_INLINE void add(int64_t, int64_t i, int64_t j0, int64_t n, T* row) {
    const int64_t* bound = bounds + i * kinks;  // first distance of segment s + 1 is bound[s]
    const T denom = denominator[i];
    const T* psi_back = psi + (i - j0);                       // psi_back[-c] = psi(i - (j0 + c))
    const int64_t d_low = i - (j0 + n - 1), d_high = i - j0;  // the tile's distances, inclusive
    int64_t s = 0;
    while (s < kinks && bound[s] <= d_low) ++s;
    for (int64_t d = d_low; d <= d_high; ++s) {
      const int64_t d_end = std::min(d_high + 1, s < kinks ? bound[s] : d_high + 1);  // segment s: [d, d_end)
      const T a = slope[s], b = intercept[s];
      const int64_t c_first = i - (d_end - 1) - j0, c_last = i - d - j0;
      for (int64_t c = c_first; c <= c_last; ++c) row[c] += a * (psi_back[-c] / denom) + b;
      d = std::max(d, d_end);
    }
  }
  const T* psi = nullptr;
  const T* denominator = nullptr;
  const int64_t* bounds = nullptr;
  int64_t kinks = 0;
  const T* all_slope = nullptr;
  const T* all_intercept = nullptr;
  const T* slope = nullptr;
  const T* intercept = nullptr;
};

}  // namespace fire_tiles

ROFORMER_TILE_TERM_ITEMS(fire_items, fire_tiles::Fire)

}  // namespace roformer::ops
