// CPU kernels of the fused CoPE term: each row (one query of one head) is independent and goes
// through cope_rows.h's row functions (the short-sequence attention kernel's too). Rows are
// claimed in runs by the pool's threads; every row is computed the same way whichever thread
// takes it.
#include "roformer/ops/common/cope_rows.h"
#include "roformer/ops/common/cpu_kernel_support.h"
#include "roformer/ops/cope_term/cope_term_kernels.h"

namespace roformer::ops {
namespace {

template <typename acc_t>
ROFORMER_ALWAYS_INLINE void forward_rows(const CopeTermLaunch& p, int64_t r0, int64_t r1) {
  std::vector<acc_t> gates(p.keys);
  for (int64_t r = r0; r < r1; ++r)
    cope_rows::forward</*kAdd=*/false>(static_cast<const acc_t*>(p.scores) + r * p.keys, p.keys,
                                       static_cast<const acc_t*>(p.at_integers) + r * p.positions, p.positions,
                                       gates.data(), static_cast<acc_t*>(p.out) + r * p.keys);
}

template <typename acc_t>
ROFORMER_ALWAYS_INLINE void backward_rows(const CopeTermLaunch& p, int64_t r0, int64_t r1) {
  cope_rows::Scratch<acc_t> scratch;
  scratch.reserve(p.keys, p.positions);
  for (int64_t r = r0; r < r1; ++r)
    cope_rows::backward(static_cast<const acc_t*>(p.scores) + r * p.keys, p.keys,
                        static_cast<const acc_t*>(p.at_integers) + r * p.positions, p.positions,
                        static_cast<const acc_t*>(p.grad) + r * p.keys, scratch,
                        static_cast<acc_t*>(p.out) + r * p.keys,
                        static_cast<acc_t*>(p.grad_at_integers) + r * p.positions);
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
