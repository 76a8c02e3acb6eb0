// CoPE's tile term: its checks and its table in the launch's dtype.
#include "roformer/ops/tile_attention/terms/cope.h"

#include <ATen/ATen.h>

#include "roformer/ops/tile_attention/terms/cope_kernel.h"

namespace roformer::ops {

namespace {
void check_cope(const CopeTerm& term, const torch::Tensor& q) {
  TORCH_CHECK(term.at_integers.dim() == 4 && term.at_integers.size(-1) >= 1 &&
                  term.at_integers.sizes().slice(0, 3) == q.sizes().slice(0, 3),
              "roformer::tile_attention: CoPE needs q . e [B, H, S, P] for q ", q.sizes(), ", got ",
              term.at_integers.sizes());
}
}  // namespace

void run_tiles(const CopeTerm& term, const torch::Tensor& q, const TileAttentionLaunch& launch) {
  check_cope(term, q);
  const at::Tensor table = term.at_integers.to(q.scalar_type()).contiguous();
  CopeTables tables;
  tables.at_integers = table.data_ptr();
  tables.positions = table.size(-1);
  if (term.totals) {  // the term's own tensor where it has one of this shape and dtype (cope_table.h reads it)
    at::Tensor& totals = *term.totals;
    if (!totals.defined() || totals.sizes() != q.sizes().slice(0, 3) || totals.scalar_type() != q.scalar_type() ||
        !totals.is_contiguous())
      totals = at::empty({q.size(0), q.size(1), q.size(2)}, q.options());
    tables.totals = totals.data_ptr();
  }
  tile_attention_cpu(launch, cope_items(launch.dtype), &tables);
}

std::vector<torch::Tensor> grad_tensors(const CopeTerm& term) {
  return {term.at_integers};
}

std::vector<torch::Tensor> run_tile_grads(const CopeTerm& term, const torch::Tensor& q,
                                          const TileAttentionLaunch& launch, const TileAttentionGrad& grad) {
  check_cope(term, q);
  const at::Tensor table = term.at_integers.to(q.scalar_type()).contiguous();
  // One column more per row: the kernel adds weight 0 at index top + 1 instead of branching. Each
  // query tile zeroes its rows before adding to them.
  const at::Tensor grad_table =
      at::empty({table.size(0), table.size(1), table.size(2), table.size(3) + 1}, table.options());
  CopeTables tables;
  tables.at_integers = table.data_ptr();
  tables.positions = table.size(-1);
  tables.grad_at_integers = grad_table.data_ptr();
  const bool known = term.totals && term.totals->defined() && term.totals->scalar_type() == q.scalar_type() &&
                     term.totals->sizes() == q.sizes().slice(0, 3);
  if (known) tables.known_totals = term.totals->data_ptr();
  tile_attention_grad_cpu(launch, grad, cope_grad_pairs(launch.dtype), &tables);
  return {grad_table.narrow(3, 0, table.size(3)).to(term.at_integers.scalar_type())};
}

}  // namespace roformer::ops
