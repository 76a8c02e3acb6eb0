// CPU kernel of the token scores: per row, the maximum in one pass (its first index found after),
// then the sum of exp(logit - maximum) in float vectors, each block's partial sum added in double.
// bfloat16 rows are widened into a per-thread float row first.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "roformer/ops/common/cpu_kernel_support.h"
#include "roformer/ops/common/vector_exp.h"
#include "roformer/ops/token_scores/token_scores_kernels.h"

#pragma GCC diagnostic ignored "-Wpsabi"  // vectors by value inside always-inlined helpers

namespace roformer::ops {
namespace {

using vf = small_gemm::Vec<float, 32>::type;
typedef int32_t vi __attribute__((vector_size(32)));
constexpr int64_t kLanes = small_gemm::Vec<float, 32>::width;
constexpr int64_t kBlock = 64 * kLanes;  // terms summed in float before the double sum

ROFORMER_ALWAYS_INLINE float lane_max(vf v) {
  float m = v[0];
  for (int64_t l = 1; l < kLanes; ++l) m = v[l] > m ? v[l] : m;
  return m;
}

ROFORMER_ALWAYS_INLINE double lane_sum(vf v) {
  double s = 0;
  for (int64_t l = 0; l < kLanes; ++l) s += v[l];
  return s;
}

// The row's largest value; `nan` set if it holds a NaN.
ROFORMER_ALWAYS_INLINE float row_max(const float* x, int64_t V, bool* nan) {
  const int64_t whole = V / kLanes * kLanes;
  vf m = vf{} - std::numeric_limits<float>::infinity();
  vi unordered{};
  for (int64_t i = 0; i < whole; i += kLanes) {
    const vf v = small_gemm::load(x + i);
    unordered |= v != v;
    m = v > m ? v : m;
  }
  float best = lane_max(m);
  bool any = false;
  for (int64_t l = 0; l < kLanes; ++l) any = any || unordered[l] != 0;
  for (int64_t i = whole; i < V; ++i) {
    any = any || std::isnan(x[i]);
    best = x[i] > best ? x[i] : best;
  }
  *nan = any;
  return best;
}

// sum_i exp(x_i - max), every x_i <= max.
ROFORMER_ALWAYS_INLINE double exp_sum(const float* x, int64_t V, float max) {
  const int64_t whole = V / kLanes * kLanes;
  const vf m = vf{} + max;
  double sum = 0;
  for (int64_t b = 0; b < whole; b += kBlock) {
    vf acc{};
    const int64_t end = std::min(whole, b + kBlock);
    for (int64_t i = b; i < end; i += kLanes) acc += small_gemm::exp_nonpositive<32>(small_gemm::load(x + i) - m);
    sum += lane_sum(acc);
  }
  for (int64_t i = whole; i < V; ++i) sum += std::exp(static_cast<double>(x[i]) - max);
  return sum;
}

ROFORMER_ALWAYS_INLINE void score_row(const float* x, int64_t V, int64_t gold, double* nll, int64_t* argmax) {
  bool nan = false;
  const float max = row_max(x, V, &nan);
  int64_t first = 0;
  if (nan) {
    while (!std::isnan(x[first])) ++first;
    *nll = std::numeric_limits<double>::quiet_NaN();
  } else {
    while (x[first] != max) ++first;
    *nll = static_cast<double>(max) + std::log(exp_sum(x, V, max)) - static_cast<double>(x[gold]);
  }
  *argmax = first;
}

ROFORMER_CLONES void score_rows_f32(const TokenScoresLaunch& p, int64_t r0, int64_t r1) {
  const float* logits = static_cast<const float*>(p.logits);
  for (int64_t r = r0; r < r1; ++r) score_row(logits + r * p.vocab, p.vocab, p.gold[r], p.nll + r, p.argmax + r);
}

ROFORMER_CLONES void widen_bf16(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(in[i]) << 16;
    std::memcpy(out + i, &bits, sizeof(float));
  }
}

ROFORMER_CLONES void score_rows_bf16(const TokenScoresLaunch& p, int64_t r0, int64_t r1, float* row) {
  const uint16_t* logits = static_cast<const uint16_t*>(p.logits);
  for (int64_t r = r0; r < r1; ++r) {
    widen_bf16(logits + r * p.vocab, row, p.vocab);
    score_row(row, p.vocab, p.gold[r], p.nll + r, p.argmax + r);
  }
}

}  // namespace

void token_scores_cpu(const TokenScoresLaunch& p) {
  for_each_claim(p.rows, 4, [&](int64_t r0, int64_t r1) {
    if (p.bf16) {
      std::vector<float> row(static_cast<size_t>(p.vocab));
      score_rows_bf16(p, r0, r1, row.data());
    } else {
      score_rows_f32(p, r0, r1);
    }
  });
}

}  // namespace roformer::ops
