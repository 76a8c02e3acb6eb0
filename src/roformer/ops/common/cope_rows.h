// CoPE's term for one row of scores, forward and backward: the row functions the fused term
// (cope_term_cpu.cpp) and the short-sequence attention kernel (ops/short_attention) share, so
// both count positions, interpolate and differentiate alike. The forward takes the gates, sums
// them from the last key back (each key's contextual position) and interpolates the row's table
// there. The backward recomputes gates and positions, then in one pass from the first key
// accumulates the positions' gradient as a running prefix sum (a key's gate counts towards every
// earlier key's position), writes the scores' gradient and collects the table's gradient per run
// of keys that share a floor index.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "roformer/ops/common/cope_math.h"
#include "roformer/ops/common/cpu_kernel_support.h"
#include "roformer/ops/common/exp_math.h"  // sigmoid

namespace roformer::ops::cope_rows {

// One thread's buffers for rows of up to `keys` keys and `positions` table entries.
template <typename acc_t>
struct Scratch {
  std::vector<acc_t> gates, position;
  std::vector<double> sum_low, sum_high;
  std::vector<int64_t> last;
  void reserve(int64_t keys, int64_t positions) {
    if (static_cast<int64_t>(gates.size()) < keys) {
      gates.resize(keys), position.resize(keys), sum_low.resize(keys), sum_high.resize(keys);
    }
    if (static_cast<int64_t>(last.size()) < positions) last.resize(positions);
  }
};

// out[j] = term_j (kAdd: s[j] + term_j) for keys j < keys, with g_t = sigmoid(s[t]),
// p_j = clamp(sum_{t >= j} g_t, 0, P - 1) and term_j = a[ceil p_j] w_j + a[floor p_j] (1 - w_j).
// out may be s itself (the gates are taken first). gates: `keys` values, left holding the gates;
// kept_positions, when not null, receives the unclamped sums (what backward_from takes).
template <bool kAdd, typename acc_t>
ROFORMER_ALWAYS_INLINE void forward(const acc_t* s, int64_t keys, const acc_t* a, int64_t positions, acc_t* gates,
                                    acc_t* out, acc_t* kept_positions = nullptr) {
  const acc_t top = static_cast<acc_t>(positions - 1);
  for (int64_t j = 0; j < keys; ++j) gates[j] = sigmoid(s[j]);
  acc_t position = 0;  // the running sum and the interpolation in one pass overlap their latencies
  for (int64_t j = keys - 1; j >= 0; --j) {
    position += gates[j];
    if (kept_positions != nullptr) kept_positions[j] = position;
    const auto at = cope_math::interpolation(position, top);
    const acc_t term = a[at.high] * at.w + a[at.low] * (acc_t(1) - at.w);
    out[j] = kAdd ? s[j] + term : term;
  }
}

// The gradients of forward's term given dz = d loss / d term, from the row's gates and unclamped
// positions (forward's): ds (d loss / d s, keys values; may be `position` itself) and da (d loss
// / d a, positions values, overwritten). No position exceeds the number of keys, so only the
// table's first keys + 1 entries can have a gradient; the rest is a zero fill. The table's
// gradient: positions only fall from the first key to the last, so the keys sharing a floor index
// form one run; each key stores the running sums of its two interpolation weights (double) and,
// plainly, its index in `last` of its floor, and a pass over the table from the top turns the sums
// at each run's end into that run's total. (Adding to da[floor] and da[ceil] at every key would
// chain the keys through memory; branching on each new run mispredicts about every other key.)
template <typename acc_t>
ROFORMER_ALWAYS_INLINE void backward_from(const acc_t* gates, const acc_t* position, int64_t keys, const acc_t* a,
                                          int64_t positions, const acc_t* dz, Scratch<acc_t>& w, acc_t* ds, acc_t* da) {
  const acc_t top = static_cast<acc_t>(positions - 1);
  const int64_t used = std::min(positions, keys + 1);
  int64_t* last = w.last.data();
  std::fill(last, last + used, int64_t{-1});
  acc_t d_gate = 0;  // d loss / d g_j = sum over keys i <= j of d loss / d position_i
  double low = 0, high = 0;
  for (int64_t j = 0; j < keys; ++j) {
    const acc_t raw = position[j];
    const auto at = cope_math::interpolation(raw, top);
    low += static_cast<double>(dz[j] * (acc_t(1) - at.w));
    high += static_cast<double>(dz[j] * at.w);  // to floor + 1: ceil whenever w > 0
    w.sum_low[j] = low;
    w.sum_high[j] = high;
    last[at.low] = j;
    if (raw >= acc_t(0) && raw <= top) d_gate += dz[j] * (a[at.high] - a[at.low]);
    ds[j] = d_gate * gates[j] * (acc_t(1) - gates[j]);
  }
  double before_low = 0, before_high = 0;  // the sums at the end of the previous run
  std::fill(da, da + positions, acc_t(0));
  for (int64_t k = used - 1; k >= 0; --k) {
    if (last[k] < 0) continue;
    da[k] += static_cast<acc_t>(w.sum_low[last[k]] - before_low);
    if (k + 1 < positions) da[k + 1] += static_cast<acc_t>(w.sum_high[last[k]] - before_high);  // top: w = 0
    before_low = w.sum_low[last[k]];
    before_high = w.sum_high[last[k]];
  }
}

// backward_from with the gates and positions recomputed from the scores s (ds may be s itself).
template <typename acc_t>
ROFORMER_ALWAYS_INLINE void backward(const acc_t* s, int64_t keys, const acc_t* a, int64_t positions, const acc_t* dz,
                                     Scratch<acc_t>& w, acc_t* ds, acc_t* da) {
  acc_t* gates = w.gates.data();
  acc_t* position = w.position.data();
  for (int64_t j = 0; j < keys; ++j) gates[j] = sigmoid(s[j]);
  acc_t sum = 0;
  for (int64_t j = keys - 1; j >= 0; --j) {
    sum += gates[j];
    position[j] = sum;
  }
  backward_from(gates, position, keys, a, positions, dz, w, ds, da);
}

}  // namespace roformer::ops::cope_rows
