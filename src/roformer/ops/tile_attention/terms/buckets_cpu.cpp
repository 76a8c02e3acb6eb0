// The bucketed tables' tile term in the CPU loop.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>

#include "roformer/ops/tile_attention/terms/buckets_kernel.h"
#include "roformer/ops/tile_attention/tile_attention_grad_loop.h"
#include "roformer/ops/tile_attention/tile_attention_loop.h"

namespace roformer::ops {
namespace bucket_tiles {

// Two gathers per pair near the query; past the distances where both bucket indices stop
// changing (before the query, and after it in bidirectional attention), the query's entry is one
// value per row and the key's a row of by_key read in order.
template <typename T, int kBytes = 32>
struct Buckets {
  Buckets(const TileAttentionLaunch& p, const void* tables)
      : launch(p), bt(*static_cast<const BucketTables*>(tables)), scale(static_cast<T>(p.scale)) {}
  ROFORMER_ALWAYS_INLINE void begin(int64_t b, int64_t h, int64_t i0, int64_t) {
    const int64_t S = launch.seq, R = bt.buckets, pair = b * launch.heads + h;
    query_rows = static_cast<const T*>(bt.by_query) + (pair * S + i0) * R;
    key_rows = static_cast<const T*>(bt.by_key) + pair * R * S;
    if (bt.grad_by_query != nullptr) {
      grad_query_rows = static_cast<T*>(bt.grad_by_query) + (pair * S + i0) * R;
      grad_key_rows = static_cast<T*>(bt.grad_by_key) + pair * R * S;
    }
    first_row = i0;
  }
  ROFORMER_ALWAYS_INLINE void tile(int64_t, int64_t) {}
  ROFORMER_ALWAYS_INLINE void output(int64_t, T*, T*) {}
  ROFORMER_ALWAYS_INLINE void add(int64_t r, int64_t i, int64_t j0, int64_t n, T* row) {
    const int64_t S = launch.seq, R = bt.buckets, from = bt.constant_from;
    const T* by_q = query_rows + r * R;
    const int64_t far = std::clamp<int64_t>(i - from - j0 + 1, 0, n);  // keys j0 + c with c < far: d >= from
    if (far > 0) {
      const T q_part = by_q[bt.query_bucket[from]];
      const T* k_part = key_rows + bt.key_bucket[from] * S + j0;
      for (int64_t c = 0; c < far; ++c) row[c] += scale * (q_part + k_part[c]);
    }
    // Keys j0 + c with c >= after: d <= constant_to (after the query, bidirectional).
    const int64_t after = std::clamp<int64_t>(i - j0 - bt.constant_to, far, n);
    for (int64_t c = far; c < after; ++c) {
      const int64_t d = i - j0 - c;
      row[c] += scale * (by_q[bt.query_bucket[d]] + key_rows[bt.key_bucket[d] * S + j0 + c]);
    }
    if (after < n) {
      const T q_part = by_q[bt.query_bucket[bt.constant_to]];
      const T* k_part = key_rows + bt.key_bucket[bt.constant_to] * S + j0;
      for (int64_t c = after; c < n; ++c) row[c] += scale * (q_part + k_part[c]);
    }
  }
  // Backward: each pair's dS goes to the query's entry and the key's, in the regions add() reads
  // (the gradients of the unscaled tables; the caller applies the scale).
  ROFORMER_ALWAYS_INLINE void grad_begin() {}
  ROFORMER_ALWAYS_INLINE void grad_tile(const T*, int64_t) {}
  ROFORMER_ALWAYS_INLINE void grad_dp(int64_t, int64_t, int64_t, int64_t, T*) {}
  ROFORMER_ALWAYS_INLINE void grad_row(int64_t r, int64_t i, int64_t j0, int64_t n, const T* ds, const T*) {
    const int64_t S = launch.seq, R = bt.buckets, from = bt.constant_from;
    T* by_q = grad_query_rows + r * R;
    const int64_t far = std::clamp<int64_t>(i - from - j0 + 1, 0, n);
    if (far > 0) {
      T* k_part = grad_key_rows + bt.key_bucket[from] * S + j0;
      T sum = 0;
      for (int64_t c = 0; c < far; ++c) {
        sum += ds[c];
        k_part[c] += ds[c];
      }
      by_q[bt.query_bucket[from]] += sum;
    }
    const int64_t after = std::clamp<int64_t>(i - j0 - bt.constant_to, far, n);
    for (int64_t c = far; c < after; ++c) {
      const int64_t d = i - j0 - c;
      by_q[bt.query_bucket[d]] += ds[c];
      grad_key_rows[bt.key_bucket[d] * S + j0 + c] += ds[c];
    }
    if (after < n) {
      T* k_part = grad_key_rows + bt.key_bucket[bt.constant_to] * S + j0;
      T sum = 0;
      for (int64_t c = after; c < n; ++c) {
        sum += ds[c];
        k_part[c] += ds[c];
      }
      by_q[bt.query_bucket[bt.constant_to]] += sum;
    }
  }
  ROFORMER_ALWAYS_INLINE void grad_tile_end(int64_t, const T*, const T*, const T*, int64_t) {}
  ROFORMER_ALWAYS_INLINE void grad_end() {}

  const TileAttentionLaunch& launch;
  const BucketTables& bt;
  T scale;
  const T* query_rows = nullptr;
  const T* key_rows = nullptr;
  T* grad_query_rows = nullptr;
  T* grad_key_rows = nullptr;
  int64_t first_row = 0;
};

}  // namespace bucket_tiles

ROFORMER_TILE_TERM_ITEMS(bucket_items, bucket_tiles::Buckets)
ROFORMER_TILE_TERM_GRAD_PAIRS(bucket_grad_pairs, bucket_tiles::Buckets)

}  // namespace roformer::ops
