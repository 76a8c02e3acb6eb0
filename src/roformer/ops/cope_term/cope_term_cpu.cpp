// CPU kernels of the fused CoPE term. Each row (one query of one head) is independent: the
// forward takes the gates, sums them from the last key back (the contextual position of every
// key) and interpolates the row's position table there; the backward recomputes the gates and
// positions into two row buffers, then in one pass from the first key scatters the table's
// gradient, accumulates the positions' gradient as a running prefix sum (a key's gate counts
// towards every earlier key's position) and writes the scores' gradient. Rows are claimed in
// runs by the pool's threads; every row is computed the same way whichever thread takes it.
#include <cmath>
#include <vector>

#include "roformer/ops/common/cpu_kernel_support.h"
#include "roformer/ops/cope_term/cope_math.h"
#include "roformer/ops/cope_term/cope_term_kernels.h"

namespace roformer::ops {
namespace {

using cope_math::interpolation;
using cope_math::sigmoid;

// Fills gates[j] = sigmoid(s_j) and position[j] = sum_{t >= j} gates[t] (unclamped).
template <typename acc_t>
ROFORMER_ALWAYS_INLINE void gates_and_positions(const acc_t* s, int64_t keys, acc_t* gates, acc_t* position) {
  for (int64_t j = 0; j < keys; ++j) gates[j] = sigmoid(s[j]);
  acc_t sum = 0;
  for (int64_t j = keys - 1; j >= 0; --j) {
    sum += gates[j];
    position[j] = sum;
  }
}

template <typename acc_t>
ROFORMER_ALWAYS_INLINE void forward_rows(const CopeTermLaunch& p, int64_t r0, int64_t r1) {
  std::vector<acc_t> gates(p.keys);
  const acc_t top = static_cast<acc_t>(p.positions - 1);
  for (int64_t r = r0; r < r1; ++r) {
    const acc_t* s = static_cast<const acc_t*>(p.scores) + r * p.keys;
    const acc_t* a = static_cast<const acc_t*>(p.at_integers) + r * p.positions;
    acc_t* out = static_cast<acc_t*>(p.out) + r * p.keys;
    for (int64_t j = 0; j < p.keys; ++j) gates[j] = sigmoid(s[j]);
    acc_t position = 0;  // the running sum and the interpolation in one pass overlap their latencies
    for (int64_t j = p.keys - 1; j >= 0; --j) {
      position += gates[j];
      const auto at = interpolation(position, top);
      out[j] = a[at.high] * at.w + a[at.low] * (acc_t(1) - at.w);
    }
  }
}

// Backward of rows [r0, r1). The table's gradient: positions only fall from the first key to the
// last, so the keys sharing a floor index form one run; each key stores the running sums of its
// two interpolation weights (double) and, plainly, its index in `last` of its floor, and a pass
// over the table from the top turns the sums at each run's end into that run's total. Adding to
// da[floor] and da[ceil] at every key would chain the keys through memory; branching on each
// new run mispredicts about every other key.
template <typename acc_t>
ROFORMER_ALWAYS_INLINE void backward_rows(const CopeTermLaunch& p, int64_t r0, int64_t r1) {
  std::vector<acc_t> gates(p.keys), position(p.keys);
  std::vector<double> sum_low(p.keys), sum_high(p.keys);
  std::vector<int64_t> last(p.positions);
  const acc_t top = static_cast<acc_t>(p.positions - 1);
  for (int64_t r = r0; r < r1; ++r) {
    const acc_t* s = static_cast<const acc_t*>(p.scores) + r * p.keys;
    const acc_t* a = static_cast<const acc_t*>(p.at_integers) + r * p.positions;
    const acc_t* dz = static_cast<const acc_t*>(p.grad) + r * p.keys;
    acc_t* ds = static_cast<acc_t*>(p.out) + r * p.keys;
    acc_t* da = static_cast<acc_t*>(p.grad_at_integers) + r * p.positions;
    gates_and_positions(s, p.keys, gates.data(), position.data());
    std::fill(last.begin(), last.end(), int64_t{-1});
    acc_t d_gate = 0;  // d loss / d g_j = sum over keys i <= j of d loss / d position_i
    double low = 0, high = 0;
    for (int64_t j = 0; j < p.keys; ++j) {
      const acc_t raw = position[j];
      const auto at = interpolation(raw, top);
      low += static_cast<double>(dz[j] * (acc_t(1) - at.w));
      high += static_cast<double>(dz[j] * at.w);  // to floor + 1: ceil whenever w > 0
      sum_low[j] = low;
      sum_high[j] = high;
      last[at.low] = j;
      if (raw >= acc_t(0) && raw <= top) d_gate += dz[j] * (a[at.high] - a[at.low]);
      ds[j] = d_gate * gates[j] * (acc_t(1) - gates[j]);
    }
    double before_low = 0, before_high = 0;  // the sums at the end of the previous run
    std::fill(da, da + p.positions, acc_t(0));
    for (int64_t k = p.positions - 1; k >= 0; --k) {
      if (last[k] < 0) continue;
      da[k] += static_cast<acc_t>(sum_low[last[k]] - before_low);
      if (k + 1 < p.positions) da[k + 1] += static_cast<acc_t>(sum_high[last[k]] - before_high);  // top: w = 0
      before_low = sum_low[last[k]];
      before_high = sum_high[last[k]];
    }
  }
}

// One function per dtype, the float ones compiled per x86-64 level (ROFORMER_CLONES: vector
// sigmoids, floor and ceil as instructions).
ROFORMER_CLONES void forward_f32(const CopeTermLaunch& p, int64_t r0, int64_t r1) {
  forward_rows<float>(p, r0, r1);
}
ROFORMER_CLONES void backward_f32(const CopeTermLaunch& p, int64_t r0, int64_t r1) {
  backward_rows<float>(p, r0, r1);
}
void forward_f64(const CopeTermLaunch& p, int64_t r0, int64_t r1) {
  forward_rows<double>(p, r0, r1);
}
void backward_f64(const CopeTermLaunch& p, int64_t r0, int64_t r1) {
  backward_rows<double>(p, r0, r1);
}

// Rows per claim: enough work per claim to hide the claim, few enough to balance two threads.
int64_t rows_per_claim(const CopeTermLaunch& p) {
  return std::max<int64_t>(1, 32768 / (p.keys + p.positions));
}

}  // namespace

void cope_term_forward_cpu(const CopeTermLaunch& p) {
  for_each_claim(p.rows, rows_per_claim(p), [&](int64_t r0, int64_t r1) {
    if (p.dtype == KernelDType::f64) {
      forward_f64(p, r0, r1);
    } else {
      forward_f32(p, r0, r1);
    }
  });
}

void cope_term_backward_cpu(const CopeTermLaunch& p) {
  for_each_claim(p.rows, rows_per_claim(p), [&](int64_t r0, int64_t r1) {
    if (p.dtype == KernelDType::f64) {
      backward_f64(p, r0, r1);
    } else {
      backward_f32(p, r0, r1);
    }
  });
}

}  // namespace roformer::ops
