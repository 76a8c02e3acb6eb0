// The bucketed tables' tile term as its loop reads it (no LibTorch types).
#pragma once

#include <cstdint>

#include "roformer/ops/tile_attention/tile_attention_kernels.h"

namespace roformer::ops {

// by_query [B, H, S, R] and by_key [B, H, R, S] contiguous in the launch's dtype, the two bucket
// indices of distance d at [d] (d from -origin to S - 1), the distance from which neither
// changes any more, and the one up to which neither has changed yet (below -origin: none).
struct BucketTables {
  const void* by_query = nullptr;
  const void* by_key = nullptr;
  const int64_t* query_bucket = nullptr;
  const int64_t* key_bucket = nullptr;
  int64_t buckets = 0, constant_from = 0, constant_to = -1;
  // The backward's gradients of by_query and by_key, laid out like them and zeroed (each pair's
  // rows its own).
  void* grad_by_query = nullptr;
  void* grad_by_key = nullptr;
};

TileItems bucket_items(KernelDType dtype);
TileGradPairs bucket_grad_pairs(KernelDType dtype);

}  // namespace roformer::ops
