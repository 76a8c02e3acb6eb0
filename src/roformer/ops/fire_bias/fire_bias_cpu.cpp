// CPU kernel of the fused FIRE bias. One row (query) at a time: each key's input x is its
// distance's logarithm from the table over the denominator of the row, its segment of the
// piecewise-linear MLP is walked from the previous key's (positions move by one from key to key,
// so the walk is a step at most, and any order stays correct), and every head's bias is that
// segment's slope times x plus its intercept. Rows are claimed in runs by the pool's threads;
// each row is computed the same way whichever thread takes it.
#include "roformer/ops/common/cpu_kernel_support.h"
#include "roformer/ops/fire_bias/fire_bias_kernels.h"

namespace roformer::ops {
namespace {

template <typename T>
ROFORMER_ALWAYS_INLINE void bias_rows(const FireBiasLaunch& p, int64_t r0, int64_t r1) {
  const T* psi = static_cast<const T*>(p.psi);
  const T* denominator = static_cast<const T*>(p.denominator);
  const T* kink = static_cast<const T*>(p.kink);
  const T* slope = static_cast<const T*>(p.slope);
  const T* intercept = static_cast<const T*>(p.intercept);
  T* out = static_cast<T*>(p.out);
  const int64_t segments = p.kinks + 1, plane = p.rows * p.keys;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t query = p.query_positions[r];
    const T denom = denominator[r];
    int64_t s = 0;  // kinks below x
    for (int64_t j = 0; j < p.keys; ++j) {
      const T x = psi[query - p.key_positions[j] - p.distance_min] / denom;
      while (s < p.kinks && kink[s] < x) ++s;
      while (s > 0 && !(kink[s - 1] < x)) --s;
      T* o = out + r * p.keys + j;
      for (int64_t h = 0; h < p.heads; ++h) o[h * plane] = slope[h * segments + s] * x + intercept[h * segments + s];
    }
  }
}

ROFORMER_CLONES void rows_f32(const FireBiasLaunch& p, int64_t r0, int64_t r1) {
  bias_rows<float>(p, r0, r1);
}
void rows_f64(const FireBiasLaunch& p, int64_t r0, int64_t r1) {
  bias_rows<double>(p, r0, r1);
}

}  // namespace

void fire_bias_cpu(const FireBiasLaunch& p) {
  const int64_t per_claim = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, p.keys * p.heads));
  for_each_claim(p.rows, per_claim, [&](int64_t r0, int64_t r1) {
    if (p.dtype == KernelDType::f64) {
      rows_f64(p, r0, r1);
    } else {
      rows_f32(p, r0, r1);
    }
  });
}

}  // namespace roformer::ops
