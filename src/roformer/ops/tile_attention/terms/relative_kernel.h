// The relative table's tile term as its loop reads it (no LibTorch types).
#pragma once

#include <cstdint>

#include "roformer/ops/tile_attention/tile_attention_kernels.h"

namespace roformer::ops {

// The term's queries (strides below, D: 1) and its table transposed, [H, D, table_ld] contiguous,
// zero past S (table_ld >= S + 8, so a tile's padded span of distances stays inside); the value
// table's row d at value + h * value_head_stride + d * D (D: 1), or null.
struct RelativeTables {
  const void* q = nullptr;
  int64_t q_stride[3] = {0, 0, 0};
  const void* table_t = nullptr;
  int64_t table_ld = 0;
  const void* value = nullptr;
  int64_t value_head_stride = 0;
};

TileItems relative_items(KernelDType dtype);

}  // namespace roformer::ops
