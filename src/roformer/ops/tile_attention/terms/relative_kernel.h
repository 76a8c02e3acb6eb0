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
  // The backward's: the table's rows [H, origin + S, D] (row stride D, D: 1; heads may share
  // them, table_head_stride 0), the value table transposed like table_t, and the gradients, each
  // pair's own and zeroed: the term queries' [B, H, S, D], the table's and the value table's
  // [B, H, origin + S, D] (the value table's null without one).
  const void* table = nullptr;
  int64_t table_head_stride = 0;
  const void* value_t = nullptr;
  void* grad_q = nullptr;
  void* grad_table = nullptr;
  void* grad_value = nullptr;
};

TileItems relative_items(KernelDType dtype);
TileGradPairs relative_grad_pairs(KernelDType dtype);

}  // namespace roformer::ops
