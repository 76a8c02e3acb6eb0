// The relative table's tile term as its loop reads it (no LibTorch types).
#pragma once

#include <cstdint>

#include "roformer/ops/tile_attention/tile_attention_kernels.h"

namespace roformer::ops {

// The term's queries (strides below, D: 1) and its table transposed, [H, D, table_ld] contiguous,
// distance d in column origin + d, zero past origin + S (table_ld >= origin + S + 16, so a tile's
// padded span of distances stays inside); the value table's distance d at value + h *
// value_head_stride + (origin + d) * D (D: 1), or null.
struct RelativeTables {
  const void* q = nullptr;
  int64_t q_stride[3] = {0, 0, 0};
  const void* table_t = nullptr;
  int64_t table_ld = 0;
  const void* value = nullptr;
  int64_t value_head_stride = 0;
  int64_t origin = 0;
  // Where the table (and the value table) stops changing: every distance d >= constant_from
  // (S: none) has row constant_from's, every d <= constant_to (-origin - 1: none) row constant_to's.
  int64_t constant_from = 0, constant_to = -1;
};

TileItems relative_items(KernelDType dtype);

}  // namespace roformer::ops
