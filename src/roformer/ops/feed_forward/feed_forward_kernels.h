// CPU driver of the blocked feed-forward op (feed_forward_cpu.cpp): the tensors one call works on
// and the two passes. feed_forward.cpp checks the arguments and allocates the outputs.
#pragma once

#include <ATen/core/Tensor.h>

#include "roformer/ops/feed_forward/bias_gelu_math.h"

namespace roformer::ops {

// Rows of one block: its [rows, F] intermediate is 256 KiB at F = 512 in float, half a core's L2.
constexpr int64_t kFeedForwardBlockRows = 128;

// All 2-D and contiguous, one dtype: x [M, H], w1 [F, H], b1 [F], w2 [H', F], b2 [H'].
struct FeedForwardTensors {
  at::Tensor x, w1, b1, w2, b2;
  GeluKind kind = GeluKind::exact;
};

// Fills pre = x w1^T [M, F], act = GELU(pre + b1) [M, F] and y = act w2^T + b2 [M, H'].
void feed_forward_forward_cpu(const FeedForwardTensors& t, const at::Tensor& pre, const at::Tensor& act,
                              const at::Tensor& y);

// From dy [M, H'] and the forward's pre and act: fills dx [M, H], dw1 [F, H], db1 [F], dw2 [H', F]
// and db2 [H'].
struct FeedForwardGradients {
  at::Tensor dx, dw1, db1, dw2, db2;
};
FeedForwardGradients feed_forward_backward_cpu(const FeedForwardTensors& t, const at::Tensor& pre,
                                               const at::Tensor& act, const at::Tensor& dy);

}  // namespace roformer::ops
