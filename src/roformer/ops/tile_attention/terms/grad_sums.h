// What the terms' backward runs share (terms/*.cpp): per-pair gradients summed over the batch in
// a fixed order, so a table shared by the batch gets the same bits at every thread count.
#pragma once

#include <ATen/ATen.h>

namespace roformer::ops {

// per_pair [B, ...] summed over its first dimension in batch order (a new tensor).
inline at::Tensor sum_over_batch(const at::Tensor& per_pair) {
  at::Tensor sum = per_pair[0].clone();
  for (int64_t b = 1; b < per_pair.size(0); ++b) sum.add_(per_pair[b]);
  return sum;
}

}  // namespace roformer::ops
