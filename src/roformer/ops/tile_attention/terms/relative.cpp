// The relative table's tile term: its checks, its table transposed and padded for the loop's
// products, and the value table in the launch's dtype.
#include "roformer/ops/tile_attention/terms/relative.h"

#include <ATen/ATen.h>

#include "roformer/ops/tile_attention/terms/relative_kernel.h"

namespace roformer::ops {

void run_tiles(const RelativeTerm& term, const torch::Tensor& q, const TileAttentionLaunch& launch) {
  TORCH_CHECK(term.q.defined() && term.q.sizes() == q.sizes() && term.q.scalar_type() == q.scalar_type() &&
                  term.q.stride(3) == 1 && term.table.dim() == 3 && term.table.size(0) == q.size(1) &&
                  term.table.size(1) >= q.size(2) && term.table.size(2) == q.size(3),
              "roformer::tile_attention: a relative table needs queries like q and a table [H, >= S, D] for q ",
              q.sizes(), ", got ", term.q.defined() ? term.q.sizes() : at::IntArrayRef{}, " and ",
              term.table.defined() ? term.table.sizes() : at::IntArrayRef{});
  const int64_t H = launch.heads, S = launch.seq, D = launch.head_dim;
  RelativeTables tables;
  tables.q = term.q.data_ptr();
  for (int a = 0; a < 3; ++a) tables.q_stride[a] = term.q.stride(a);
  tables.table_ld = (S + 15) / 8 * 8;  // >= S + 8
  at::Tensor table_t = at::zeros({H, D, tables.table_ld}, q.options());
  table_t.narrow(2, 0, S).copy_(term.table.narrow(1, 0, S).transpose(1, 2));
  tables.table_t = table_t.data_ptr();
  at::Tensor values;
  if (term.value_table.defined()) {
    TORCH_CHECK(term.value_table.dim() == 3 && term.value_table.size(0) == H && term.value_table.size(1) >= S &&
                    term.value_table.size(2) == D,
                "roformer::tile_attention: a relative value table must be [H, >= S, D] for q ", q.sizes(), ", got ",
                term.value_table.sizes());
    values = term.value_table.to(q.scalar_type());
    if (values.stride(2) != 1 || values.stride(1) != D) values = values.contiguous();  // heads may share rows
    tables.value = values.data_ptr();
    tables.value_head_stride = values.stride(0);
  }
  tile_attention_cpu(launch, relative_items(launch.dtype), &tables);
}

}  // namespace roformer::ops
