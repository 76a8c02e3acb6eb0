// CoPE's tile term in the CPU loop: the gates of a tile's keys in one vectorisable pass, then the
// running sum from the row's last key back (carried between tiles) and the interpolation, in
// ops::cope_term's order.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "roformer/ops/common/cope_math.h"
#include "roformer/ops/common/small_gemm.h"
#include "roformer/ops/tile_attention/terms/cope_kernel.h"
#include "roformer/ops/tile_attention/tile_attention_grad_loop.h"
#include "roformer/ops/tile_attention/tile_attention_loop.h"

namespace roformer::ops {
namespace cope_tiles {

template <typename T, int kBytes = 32>
struct Cope {
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
    if (static_cast<int64_t>(gates.size()) < n) gates.resize(n);
    for (int64_t c = 0; c < n; ++c) gates[c] = sigmoid(row[c]);
    const T* a = rows_table + r * positions;
    T position = counted[r];
    for (int64_t c = n - 1; c >= 0; --c) {
      position += gates[c];
      const auto at = cope_math::interpolation(position, top);
      row[c] += a[at.high] * at.w + a[at.low] * (T(1) - at.w);
    }
    counted[r] = position;
  }

  // ---- Backward ----
  // Each row's total of the gates over its visible keys (the count at key 0): the forward's, or
  // from a pass of q k^T.
  ROFORMER_ALWAYS_INLINE void grad_begin() {
    std::fill(before.begin(), before.end(), T(0));
    std::fill(by_gate.begin(), by_gate.end(), T(0));
    rows_grad = static_cast<T*>(cope.grad_at_integers) + (pair * seq + first_row) * (positions + 1);
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
    const T* a = rows_table + r * positions;
    T* gate = tile_gates.data() + r * kTileKeys;
    T* weight = tile_counts.data() + r * kTileKeys;
    T* by_count = tile_slopes.data() + r * kTileKeys;
    int32_t* low = tile_lows.data() + r * kTileKeys;
    for (int64_t c = 0; c < n; ++c) gate[c] = sigmoid(row[c]);  // vectorises
    T seen = before[r];
    for (int64_t c = 0; c < n; ++c) {
      const T count = total[r] - seen;
      seen += gate[c];
      const auto at = cope_math::interpolation(count, top);
      row[c] += a[at.high] * at.w + a[at.low] * (T(1) - at.w);
      low[c] = static_cast<int32_t>(at.low);
      weight[c] = at.w;
      by_count[c] = count >= T(0) && count <= top ? a[at.high] - a[at.low] : T(0);
    }
    before[r] = seen;
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
    const int32_t* low = tile_lows.data() + r * kTileKeys;
    T d_gate = by_gate[r];
    for (int64_t c = 0; c < n; ++c) {
      const T dz = ds[c];
      da[low[c]] += dz * (T(1) - weight[c]);
      da[low[c] + 1] += dz * weight[c];
      d_gate += dz * by_count[c];
      ds[c] = dz + d_gate * gate[c] * (T(1) - gate[c]);
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
  std::vector<int32_t> tile_lows;
};

}  // namespace cope_tiles

ROFORMER_TILE_TERM_ITEMS(cope_items, cope_tiles::Cope)
ROFORMER_TILE_TERM_GRAD_PAIRS(cope_grad_pairs, cope_tiles::Cope)

}  // namespace roformer::ops
