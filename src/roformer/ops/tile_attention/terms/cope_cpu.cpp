// CoPE's tile term in the CPU loop: the gates of a tile's keys in one vectorisable pass, then, a
// vector of keys at a time (common/cope_vectors.h), the running sum from the row's last key back
// (carried between vectors and tiles) and the interpolation; the backward's counts, d loss / d
// gate and d score likewise, its table gradient key by key.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "roformer/ops/common/cope_math.h"
#include "roformer/ops/common/cope_vectors.h"
#include "roformer/ops/common/small_gemm.h"
#include "roformer/ops/tile_attention/terms/cope_kernel.h"
#include "roformer/ops/tile_attention/tile_attention_grad_loop.h"
#include "roformer/ops/tile_attention/tile_attention_loop.h"

namespace roformer::ops {
namespace cope_tiles {

template <typename T, int kBytes = 32>
struct Cope {
  using Lanes = cope_vectors::Lanes<T, kBytes>;
  using vec = typename Lanes::vec;
  using index_t = typename Lanes::index_t;
  static constexpr int64_t W = Lanes::W;
  // The backward visits a row's keys from key 0 up (tile_attention_grad_loop.h): a key's count is
  // then the row's total less the gates before it, and d loss / d gate_t sums the keys up to t.
  static constexpr bool kKeysAscending = true;
  Cope(const TileAttentionLaunch& p, const void* tables_in)
      : launch(p),
        cope(*static_cast<const CopeTables*>(tables_in)),
        table(static_cast<const T*>(cope.at_integers)),
        heads(p.heads),
        seq(p.seq),
        positions(cope.positions),
        top(static_cast<T>(positions - 1)),
        grads(cope.grad_at_integers != nullptr) {
    gates.resize(kTileKeys);
    if (!grads) return;
    total.resize(kTileQueryRows);
    before.resize(kTileQueryRows);
    by_gate.resize(kTileQueryRows);
    tile_gates.resize(kTileQueryRows * kTileKeys);
    tile_counts.resize(kTileQueryRows * kTileKeys);
    tile_slopes.resize(kTileQueryRows * kTileKeys);
    tile_lows.resize(kTileQueryRows * kTileKeys);
  }
  ROFORMER_ALWAYS_INLINE void begin(int64_t b, int64_t h, int64_t i0, int64_t rows) {
    pair = b * heads + h;
    first_row = i0;
    row_count = rows;
    rows_table = table + (pair * seq + i0) * positions;
    counted.assign(rows, T(0));
  }
  ROFORMER_ALWAYS_INLINE void tile(int64_t, int64_t) {}
  ROFORMER_ALWAYS_INLINE void output(int64_t, T*, T*) {}
  // The forward's rows have counted every visible key: their totals, for the backward.
  ROFORMER_ALWAYS_INLINE void end() {
    if (cope.totals == nullptr) return;
    std::copy(counted.begin(), counted.end(), static_cast<T*>(cope.totals) + pair * seq + first_row);
  }
  ROFORMER_ALWAYS_INLINE void add(int64_t r, int64_t i, int64_t j0, int64_t n, T* row) {
    if (grads) return add_ascending(r, i, j0, n, row);
    const int64_t padded = (n + W - 1) / W * W;
    for (int64_t c = 0; c < n; ++c) gates[c] = sigmoid(row[c]);
    std::fill(gates.data() + n, gates.data() + padded, T(0));
    const T* a = rows_table + r * positions;
    T position = counted[r];
    for (int64_t c0 = padded - W; c0 >= 0; c0 -= W) {
      const vec counts =
          cope_vectors::running_sums<false, T, kBytes>(small_gemm::load<kBytes>(gates.data() + c0)) + position;
      position = counts[0];
      cope_vectors::Interpolated<T, kBytes> at;
      const vec s = small_gemm::load<kBytes>(row + c0);
      if (cope_vectors::interpolate(a, positions, counts, at)) {
        small_gemm::store<kBytes>(row + c0, cope_vectors::first_lanes<T, kBytes>(n - c0, s + at.term(), s));
      } else {
        for (int64_t c = 0; c < std::min(W, n - c0); ++c) {
          const auto one = cope_math::interpolation(counts[c], top);
          row[c0 + c] += a[one.high] * one.w + a[one.low] * (T(1) - one.w);
        }
      }
    }
    counted[r] = position;
    if (position == position)
      cope_vectors::prefetch_entries(a, positions, int64_t(position), int64_t(position) + kTileKeys);
  }

  // ---- Backward ----
  // Each row's total of the gates over its visible keys (the count at key 0): the forward's, or
  // from a pass of q k^T.
  ROFORMER_ALWAYS_INLINE void grad_begin() {
    std::fill(before.begin(), before.end(), T(0));
    std::fill(by_gate.begin(), by_gate.end(), T(0));
    rows_grad = static_cast<T*>(cope.grad_at_integers) + (pair * seq + first_row) * (positions + 1);
    std::fill(rows_grad, rows_grad + row_count * (positions + 1), T(0));  // zeroed here, while the rows are in cache
    if (cope.known_totals != nullptr) {
      const T* known = static_cast<const T*>(cope.known_totals) + pair * seq + first_row;
      std::copy(known, known + row_count, total.begin());
      return;
    }
    constexpr int64_t W = small_gemm::Vec<T, kBytes>::width;
    const int64_t D = launch.head_dim, b = pair / heads, h = pair % heads;
    const T* q = static_cast<const T*>(launch.q) + b * launch.q_stride[0] + h * launch.q_stride[1] +
                 first_row * launch.q_stride[2];
    const T* kt = static_cast<const T*>(launch.kt) + pair * D * launch.kt_ld;
    const T scale = static_cast<T>(launch.scale);
    int64_t key_end = first_row + row_count;
    if (launch.key_lengths != nullptr) key_end = std::min(key_end, launch.key_lengths[b]);
    std::fill(total.begin(), total.end(), T(0));
    for (int64_t j0 = 0; j0 < key_end; j0 += kTileKeys) {
      const int64_t width = std::min(key_end, j0 + kTileKeys) - j0, padded = (width + W - 1) / W * W;
      small_gemm::gemm<T, false, kBytes>(row_count, padded, D, {q, launch.q_stride[2], 1}, kt + j0, launch.kt_ld,
                                         tile_counts.data(), kTileKeys);
      for (int64_t r = 0; r < row_count; ++r) {
        const int64_t n = std::clamp<int64_t>(first_row + r + 1 - j0, 0, width);
        T* s = tile_counts.data() + r * kTileKeys;
        for (int64_t c = 0; c < n; ++c) s[c] = sigmoid(s[c] * scale);  // vectorises
        total[r] += tile_loop::row_sum<kBytes>(s, n);
      }
    }
  }
  // The term in the backward's order: key j's count is the total less the gates of the keys
  // before it. Kept per key for grad_row: the gate, the count's floor index and upper weight, and
  // d term / d count (0 where the count is clamped).
  ROFORMER_ALWAYS_INLINE void add_ascending(int64_t r, int64_t, int64_t, int64_t n, T* row) {
    const int64_t padded = (n + W - 1) / W * W;
    const T* a = rows_table + r * positions;
    T* gate = tile_gates.data() + r * kTileKeys;
    T* weight = tile_counts.data() + r * kTileKeys;
    T* by_count = tile_slopes.data() + r * kTileKeys;
    index_t* low = tile_lows.data() + r * kTileKeys;
    for (int64_t c = 0; c < n; ++c) gate[c] = sigmoid(row[c]);  // vectorises
    std::fill(gate + n, gate + padded, T(0));
    const vec zero{}, top_lanes = zero + top;
    T seen = before[r];
    for (int64_t c0 = 0; c0 < padded; c0 += W) {
      const vec g = small_gemm::load<kBytes>(gate + c0), through = cope_vectors::running_sums<true, T, kBytes>(g);
      const vec counts = total[r] - (seen + (through - g));
      seen += through[W - 1];
      cope_vectors::Interpolated<T, kBytes> at;
      if (!cope_vectors::interpolate(a, positions, counts, at)) {
        ascending_keys_one_by_one(a, counts, std::min(W, n - c0), row + c0, low + c0, weight + c0, by_count + c0);
        continue;
      }
      const vec s = small_gemm::load<kBytes>(row + c0);
      small_gemm::store<kBytes>(row + c0, cope_vectors::first_lanes<T, kBytes>(n - c0, s + at.term(), s));
      std::memcpy(low + c0, &at.low, sizeof(at.low));
      small_gemm::store<kBytes>(weight + c0, at.w);
      const vec inside = counts >= zero && counts <= top_lanes ? at.at_high - at.at_low : zero;
      small_gemm::store<kBytes>(by_count + c0, inside);
    }
    before[r] = seen;
    const T next = total[r] - seen;  // the next tile's counts fall from here
    if (next == next) cope_vectors::prefetch_entries(a, positions, int64_t(next) - kTileKeys, int64_t(next) + 1);
  }
  // add_ascending's step for keys whose indices do not fit one window of the table row.
  ROFORMER_ALWAYS_INLINE void ascending_keys_one_by_one(const T* a, const vec& counts, int64_t n, T* row, index_t* low,
                                                        T* weight, T* by_count) {
    for (int64_t c = 0; c < W; ++c) {
      const auto at = cope_math::interpolation(counts[c], top);
      if (c < n) row[c] += a[at.high] * at.w + a[at.low] * (T(1) - at.w);
      low[c] = static_cast<index_t>(at.low);
      weight[c] = at.w;
      by_count[c] = counts[c] >= T(0) && counts[c] <= top ? a[at.high] - a[at.low] : T(0);
    }
  }
  ROFORMER_ALWAYS_INLINE void grad_tile(const T*, int64_t) {}
  ROFORMER_ALWAYS_INLINE void grad_dp(int64_t, int64_t, int64_t, int64_t, T*) {}
  // The table's gradient at the two indices of each key's count; d loss / d gate_t (the keys up
  // to t, as the count of each includes gate_t, where its count is inside [0, P - 1]) through the
  // gate's sigmoid onto the score, which the loop then carries to q and k.
  // The table's row has one entry more (grad_row writes index low + 1 with weight 0 at the top).
  ROFORMER_ALWAYS_INLINE void grad_row(int64_t r, int64_t, int64_t, int64_t n, T* ds, const T*) {
    T* da = rows_grad + r * (positions + 1);
    const T* gate = tile_gates.data() + r * kTileKeys;
    const T* weight = tile_counts.data() + r * kTileKeys;
    const T* by_count = tile_slopes.data() + r * kTileKeys;
    const index_t* low = tile_lows.data() + r * kTileKeys;
    for (int64_t c = 0; c < n; ++c) {
      const T dz = ds[c];
      da[low[c]] += dz * (T(1) - weight[c]);
      da[low[c] + 1] += dz * weight[c];
    }
    const vec zero{};
    T d_gate = by_gate[r];
    for (int64_t c0 = 0; c0 < n; c0 += W) {
      const vec dz = small_gemm::load<kBytes>(ds + c0), g = small_gemm::load<kBytes>(gate + c0);
      const vec to_gate =
          cope_vectors::first_lanes<T, kBytes>(n - c0, dz * small_gemm::load<kBytes>(by_count + c0), zero);
      const vec d_gates = cope_vectors::running_sums<true, T, kBytes>(to_gate) + d_gate;
      d_gate = d_gates[W - 1];
      small_gemm::store<kBytes>(ds + c0,
                                cope_vectors::first_lanes<T, kBytes>(n - c0, dz + d_gates * g * (T(1) - g), dz));
    }
    by_gate[r] = d_gate;
  }
  ROFORMER_ALWAYS_INLINE void grad_tile_end(int64_t, const T*, const T*, const T*, int64_t) {}
  ROFORMER_ALWAYS_INLINE void grad_end() {}

  const TileAttentionLaunch& launch;
  const CopeTables& cope;
  const T* table;
  int64_t heads, seq, positions;
  T top;
  bool grads;
  const T* rows_table = nullptr;
  T* rows_grad = nullptr;
  int64_t pair = 0, first_row = 0, row_count = 0;
  std::vector<T> counted;  // per row: the gates summed over the keys already visited
  std::vector<T> gates;
  // Backward, per row: its gates' total, the gates of the keys visited, d loss / d gate summed
  // over them; per key of the tile: its gate, its count's upper weight (and, in grad_begin, the
  // scores), d term / d count and the floor index.
  std::vector<T> total, before, by_gate, tile_gates, tile_counts, tile_slopes;
  std::vector<index_t> tile_lows;
};

}  // namespace cope_tiles

ROFORMER_TILE_TERM_ITEMS(cope_items, cope_tiles::Cope)
ROFORMER_TILE_TERM_GRAD_PAIRS(cope_grad_pairs, cope_tiles::Cope)

}  // namespace roformer::ops
