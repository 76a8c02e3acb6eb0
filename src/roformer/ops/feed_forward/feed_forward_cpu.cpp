// CPU driver of the blocked feed-forward op. The threads claim blocks of kFeedForwardBlockRows rows
// from a shared counter (a thread slowed by a neighbour process takes fewer); on a block, each
// product is one BLAS call, single-threaded inside the parallel region, and bias + GELU and its
// derivative are the bias_gelu kernels on the block's rows, so a block's [rows, F] intermediate is
// written and read again while it is in the thread's cache. A block's rows and its order of
// operations are fixed, so results do not depend on which thread ran it or how many there are.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>

#include "roformer/ops/common/cpu_kernel_support.h"
#include "roformer/ops/feed_forward/bias_gelu_kernels.h"
#include "roformer/ops/feed_forward/feed_forward_kernels.h"

namespace roformer::ops {
namespace {

int64_t block_count(int64_t rows) {
  return (rows + kFeedForwardBlockRows - 1) / kFeedForwardBlockRows;
}

// Calls fn(block, first_row, rows) for every block of `rows`, blocks claimed from a counter.
template <typename Fn>
void over_blocks(int64_t rows, Fn fn) {
  for_each_claim(block_count(rows), 1, [&](int64_t b, int64_t) {
    // The products below are kernels of this op: no autograd on the worker threads either.
    const at::AutoDispatchBelowADInplaceOrView below_autograd;
    const int64_t r0 = b * kFeedForwardBlockRows;
    fn(b, r0, std::min(kFeedForwardBlockRows, rows - r0));
  });
}

// The bias_gelu launch for rows [r0, r0 + n) of pre ([M, F]).
BiasGeluLaunch gelu_launch(const FeedForwardTensors& t, const at::Tensor& pre, int64_t r0, int64_t n) {
  BiasGeluLaunch p;
  p.rows = n;
  p.cols = pre.size(1);
  p.dtype = pre.scalar_type() == at::kDouble ? KernelDType::f64 : KernelDType::f32;
  p.kind = t.kind;
  p.bias = t.b1.data_ptr();
  p.x = static_cast<const char*>(pre.data_ptr()) + r0 * p.cols * pre.element_size();
  return p;
}

// db1 = the blocks' partial column sums ([blocks, F]) added in block order.
template <typename T>
void sum_in_block_order(const at::Tensor& partial, const at::Tensor& out) {
  const int64_t blocks = partial.size(0), F = partial.size(1);
  const T* src = partial.data_ptr<T>();
  T* dst = out.data_ptr<T>();
  std::fill(dst, dst + F, T(0));
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t j = 0; j < F; ++j) dst[j] += src[b * F + j];
}

}  // namespace

void feed_forward_forward_cpu(const FeedForwardTensors& t, const at::Tensor& pre, const at::Tensor& act,
                              const at::Tensor& y) {
  const at::Tensor w1t = t.w1.t(), w2t = t.w2.t();
  over_blocks(t.x.size(0), [&](int64_t, int64_t r0, int64_t n) {
    at::Tensor pre_b = pre.narrow(0, r0, n), act_b = act.narrow(0, r0, n), y_b = y.narrow(0, r0, n);
    at::mm_out(pre_b, t.x.narrow(0, r0, n), w1t);
    BiasGeluLaunch p = gelu_launch(t, pre, r0, n);
    p.out = act_b.data_ptr();
    bias_gelu_forward_cpu(p);  // inside the parallel region: on this thread
    at::addmm_out(y_b, t.b2, act_b, w2t);
  });
}

FeedForwardGradients feed_forward_backward_cpu(const FeedForwardTensors& t, const at::Tensor& pre,
                                               const at::Tensor& act, const at::Tensor& dy) {
  const int64_t M = t.x.size(0), F = t.w1.size(0);
  FeedForwardGradients g;
  g.dx = at::empty_like(t.x);
  at::Tensor dpre = at::empty_like(pre);
  at::Tensor partial = at::empty({block_count(M), F}, pre.options());
  over_blocks(M, [&](int64_t b, int64_t r0, int64_t n) {
    at::Tensor dact = at::mm(dy.narrow(0, r0, n), t.w2);  // [n, F]: stays in this thread's cache
    at::Tensor dpre_b = dpre.narrow(0, r0, n);
    BiasGeluLaunch p = gelu_launch(t, pre, r0, n);
    p.grad = dact.data_ptr();
    p.out = dpre_b.data_ptr();
    p.bias_grad = static_cast<char*>(partial.data_ptr()) + b * F * partial.element_size();
    bias_gelu_backward_cpu(p);
    at::Tensor dx_b = g.dx.narrow(0, r0, n);
    at::mm_out(dx_b, dpre_b, t.w1);
  });
  g.dw1 = at::mm(dpre.t(), t.x);
  g.dw2 = at::mm(dy.t(), act);
  g.db2 = dy.sum(0);
  g.db1 = at::empty({F}, pre.options());
  if (pre.scalar_type() == at::kDouble) {
    sum_in_block_order<double>(partial, g.db1);
  } else {
    sum_in_block_order<float>(partial, g.db1);
  }
  return g;
}

}  // namespace roformer::ops
