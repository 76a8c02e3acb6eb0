// The relative table's tile term: its checks, its table transposed and padded for the loop's
// products, the value table in the launch's dtype, and where the tables stop changing.
#include "roformer/ops/tile_attention/terms/relative.h"

#include <ATen/ATen.h>

#include <cstring>
#include <vector>

#include "roformer/ops/tile_attention/terms/grad_sums.h"
#include "roformer/ops/tile_attention/terms/relative_kernel.h"

namespace roformer::ops {
namespace relative_tile_tables {

// Whether rows a and b of every head of t [H, N, D] (unit stride along D; heads may share rows,
// stride 0) are equal bit for bit.
bool rows_equal(const at::Tensor& t, int64_t a, int64_t b) {
  const int64_t element = static_cast<int64_t>(t.element_size()), row_bytes = t.size(2) * element;
  const int64_t heads = t.stride(0) == 0 ? 1 : t.size(0), head_step = t.stride(0) * element,
                row_step = t.stride(1) * element;
  const auto* base = static_cast<const char*>(t.data_ptr());
  for (int64_t h = 0; h < heads; ++h)
    if (std::memcmp(base + h * head_step + a * row_step, base + h * head_step + b * row_step, row_bytes) != 0)
      return false;
  return true;
}

// The distances from which (before the query) and up to which (after it) the tables stop
// changing, as RelativeTables describes them; tables [H, >= origin + S, D] (row origin + d) with
// unit stride along D.
void constant_ends(const std::vector<at::Tensor>& tables, int64_t origin, int64_t S, RelativeTables& out) {
  auto equal = [&](int64_t d, int64_t e) {
    for (const at::Tensor& t : tables)
      if (!rows_equal(t, origin + d, origin + e)) return false;
    return true;
  };
  int64_t from = S - 1;
  while (from > 0 && equal(from - 1, from)) --from;
  out.constant_from = from;
  int64_t to = -origin - 1;
  if (origin > 0) {
    to = -origin;
    while (to < 0 && equal(to, to + 1)) ++to;
  }
  out.constant_to = to;
}

// The term's tables as the loop reads them (checked), the tensors behind them in `keep`, the
// table in the launch's dtype at keep[0] and the value table (or undefined) at keep[1].
RelativeTables describe(const RelativeTerm& term, const at::Tensor& q, const TileAttentionLaunch& launch,
                        std::vector<at::Tensor>& keep) {
  const int64_t H = launch.heads, S = launch.seq, D = launch.head_dim, rows = term.origin + S;
  TORCH_CHECK(term.q.defined() && term.q.sizes() == q.sizes() && term.q.scalar_type() == q.scalar_type() &&
                  term.q.stride(3) == 1 && term.table.dim() == 3 && term.table.size(0) == H &&
                  term.table.size(1) >= rows && term.table.size(2) == D && term.origin >= 0,
              "roformer::tile_attention: a relative table needs queries like q and a table [H, >= origin + S, D] "
              "for q ",
              q.sizes(), " and origin ", term.origin, ", got ", term.q.defined() ? term.q.sizes() : at::IntArrayRef{},
              " and ", term.table.defined() ? term.table.sizes() : at::IntArrayRef{});
  TORCH_CHECK(launch.causal || term.origin >= S - 1,
              "roformer::tile_attention: a relative table for bidirectional attention needs the keys after the query, "
              "origin >= S - 1 = ",
              S - 1, "; got origin ", term.origin);
  RelativeTables tables;
  tables.q = term.q.data_ptr();
  for (int a = 0; a < 3; ++a) tables.q_stride[a] = term.q.stride(a);
  tables.origin = term.origin;
  tables.table_ld = (rows + 23) / 8 * 8;  // >= origin + S + 16: a tile's span padded to 64 bytes
  at::Tensor table = term.table.narrow(1, 0, rows).to(q.scalar_type());  // heads may share rows
  if (table.stride(2) != 1) table = table.contiguous();
  at::Tensor table_t = at::zeros({H, D, tables.table_ld}, q.options());
  table_t.narrow(2, 0, rows).copy_(table.transpose(1, 2));
  tables.table_t = table_t.data_ptr();
  at::Tensor values;
  if (term.value_table.defined()) {
    TORCH_CHECK(term.value_table.dim() == 3 && term.value_table.size(0) == H && term.value_table.size(1) >= rows &&
                    term.value_table.size(2) == D,
                "roformer::tile_attention: a relative value table must be [H, >= origin + S, D] like the table for q ",
                q.sizes(), ", got ", term.value_table.sizes());
    values = term.value_table.to(q.scalar_type());
    if (values.stride(2) != 1 || values.stride(1) != D) values = values.contiguous();  // heads may share rows
    tables.value = values.data_ptr();
    tables.value_head_stride = values.stride(0);
  }
  std::vector<at::Tensor> compared{table};
  if (values.defined()) compared.push_back(values);
  constant_ends(compared, term.origin, S, tables);
  keep = {table, values, table_t};
  return tables;
}

// The per-pair table gradients [B, H, N, D] summed over the batch, times `factor`, in `like`'s
// dtype and row count (zero past N).
at::Tensor table_grad(const at::Tensor& per_pair, double factor, const at::Tensor& like) {
  at::Tensor out = at::zeros(like.sizes(), like.options());
  out.narrow(1, 0, per_pair.size(2)).copy_(sum_over_batch(per_pair).mul_(factor));
  return out;
}

}  // namespace relative_tile_tables

void run_tiles(const RelativeTerm& term, const torch::Tensor& q, const TileAttentionLaunch& launch) {
  std::vector<at::Tensor> keep;
  const RelativeTables tables = relative_tile_tables::describe(term, q, launch, keep);
  tile_attention_cpu(launch, relative_items(launch.dtype), &tables);
}

std::vector<torch::Tensor> grad_tensors(const RelativeTerm& term) {
  return {term.q, term.table, term.value_table};
}

std::vector<torch::Tensor> run_tile_grads(const RelativeTerm& term, const torch::Tensor& q,
                                          const TileAttentionLaunch& launch, const TileAttentionGrad& grad) {
  std::vector<at::Tensor> keep;
  RelativeTables tables = relative_tile_tables::describe(term, q, launch, keep);
  const int64_t B = launch.batch, H = launch.heads, S = launch.seq, D = launch.head_dim, rows = term.origin + S;
  at::Tensor table = keep[0];
  if (table.stride(1) != D) table = table.contiguous();  // rows of D, heads may share them
  tables.table = table.data_ptr();
  tables.table_head_stride = table.stride(0);
  const at::Tensor grad_q = at::zeros({B, H, S, D}, q.options());
  const at::Tensor grad_table = at::zeros({B, H, rows, D}, q.options());
  at::Tensor grad_value, value_t;
  if (keep[1].defined()) {
    value_t = at::zeros({H, D, tables.table_ld}, q.options());
    value_t.narrow(2, 0, rows).copy_(keep[1].narrow(1, 0, rows).transpose(1, 2));
    tables.value_t = value_t.data_ptr();
    grad_value = at::zeros({B, H, rows, D}, q.options());
    tables.grad_value = grad_value.data_ptr();
  }
  tables.grad_q = grad_q.data_ptr();
  tables.grad_table = grad_table.data_ptr();
  tile_attention_grad_cpu(launch, grad, relative_grad_pairs(launch.dtype), &tables);
  std::vector<at::Tensor> grads{grad_q.mul_(launch.scale).to(term.q.scalar_type()),
                                relative_tile_tables::table_grad(grad_table, launch.scale, term.table), at::Tensor()};
  if (grad_value.defined()) grads[2] = relative_tile_tables::table_grad(grad_value, 1.0, term.value_table);
  return grads;
}

}  // namespace roformer::ops
