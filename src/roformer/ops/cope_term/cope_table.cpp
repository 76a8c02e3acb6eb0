// CoPE's causal table products (see cope_table.h): blocks of query rows, each product written
// straight into its window of the result, forward and backward: on the CPU kernels of
// cope_table_cpu.cpp where they take the dtype and head size, else batched GEMMs with the
// result's row stride.
#include "roformer/ops/cope_term/cope_table.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "roformer/ops/common/kernel_dtype_torch.h"
#include "roformer/ops/cope_term/cope_table_kernels.h"

namespace roformer::ops {
namespace {

constexpr int64_t kBlockRows = kCausalTableBlockRows;

// The entries rows [begin, end) can read: up to the count of row end - 1 (end), at most P of them.
int64_t reachable(int64_t end, int64_t positions) {
  return std::min(end + 1, positions);
}

// [B, H, n, C] as a view [B * H, n, C] (of q's, the result's and the gradients' row blocks, whose
// dims 0 and 1 are contiguous with each other; view() fails rather than copy).
at::Tensor batched(const at::Tensor& t) {
  return t.view({t.size(0) * t.size(1), t.size(2), t.size(3)});
}

// Per block of rows, the entries its rows can read (reachable()), or, given the rows' gate totals
// (row_totals, [B, H, S]; undefined or empty: none), fewer where those bound their counts lower.
std::vector<int64_t> block_reach(const at::Tensor& row_totals, int64_t seq, int64_t positions) {
  std::vector<int64_t> reach;
  for (int64_t begin = 0; begin < seq; begin += kBlockRows)
    reach.push_back(reachable(std::min(seq, begin + kBlockRows), positions));
  if (!row_totals.defined() || row_totals.numel() == 0) return reach;
  const at::Tensor most = row_totals.to(at::kDouble).amax({0, 1});  // [S]; NaN where not written
  const double* m = most.data_ptr<double>();
  for (size_t block = 0; block < reach.size(); ++block) {
    const int64_t begin = int64_t(block) * kBlockRows, end = std::min(seq, begin + kBlockRows);
    double top = -1;
    bool known = true;
    for (int64_t i = begin; i < end; ++i) {
      known = known && m[i] == m[i];
      top = std::max(top, m[i]);
    }
    if (known && top < double(positions)) reach[block] = std::min(reach[block], int64_t(std::floor(top)) + 3);
  }
  return reach;
}

// Whether cope_table_cpu.cpp's kernels take q (contiguous) and its table.
bool kernels_take(const at::Tensor& q) {
  return q.is_cpu() && (q.scalar_type() == at::kFloat || q.scalar_type() == at::kDouble) &&
         cope_table_kernels_take(to_kernel_dtype(q.scalar_type(), "roformer::causal_table_products"), q.size(3));
}

CopeTableLaunch launch_of(const at::Tensor& q, const at::Tensor& table, const std::vector<int64_t>& reach) {
  CopeTableLaunch p;
  p.dtype = to_kernel_dtype(q.scalar_type(), "roformer::causal_table_products");
  p.pairs = q.size(0) * q.size(1);
  p.seq = q.size(2);
  p.dim = q.size(3);
  p.positions = table.size(1);
  p.reach = reach.data();
  p.q = q.data_ptr();
  p.table = table.data_ptr();
  return p;
}

at::Tensor table_products_forward(const at::Tensor& q, const at::Tensor& table) {
  const int64_t seq = q.size(2), positions = table.size(1);
  at::Tensor out = at::empty({q.size(0), q.size(1), seq, positions}, q.options());
  if (kernels_take(q)) {
    const at::Tensor e = table.contiguous();
    const std::vector<int64_t> reach = block_reach(at::Tensor(), seq, positions);
    CopeTableLaunch p = launch_of(q, e, reach);
    p.out = out.data_ptr();
    cope_table_forward_cpu(p);
    return out;
  }
  for (int64_t begin = 0; begin < seq; begin += kBlockRows) {
    const int64_t rows = std::min(kBlockRows, seq - begin), reach = reachable(begin + rows, positions);
    at::Tensor window = out.narrow(2, begin, rows);
    const at::Tensor e = table.narrow(1, 0, reach).unsqueeze(0).expand({q.size(0) * q.size(1), -1, -1});
    at::Tensor reached = batched(window.narrow(3, 0, reach));  // a view into out
    at::bmm_out(reached, batched(q.narrow(2, begin, rows)), e);
    if (reach < positions) window.narrow(3, reach, positions - reach).zero_();
  }
  return out;
}

class CausalTableProducts : public torch::autograd::Function<CausalTableProducts> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q, const at::Tensor& table,
                            const at::Tensor& row_totals) {
    ctx->save_for_backward({q, table});
    ctx->saved_data["row_totals"] = row_totals;  // written after this forward: not a saved variable
    return table_products_forward(q, table);
  }

  // d q rows = G e^T and d e += q^T G over each block's reachable window of G.
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &table = saved[1];
    at::Tensor grad = grads[0].to(q.scalar_type());
    // The tile kernel's is a narrow of one wider; any layout whose rows cannot be batched is copied.
    if (grad.stride(0) != grad.stride(1) * grad.size(1) || grad.stride(3) != 1) grad = grad.contiguous();
    const int64_t seq = q.size(2), positions = table.size(1), pairs = q.size(0) * q.size(1);
    at::Tensor grad_q = at::empty_like(q, at::MemoryFormat::Contiguous);
    const at::IValue& totals = ctx->saved_data["row_totals"];  // empty: none given
    const std::vector<int64_t> reaches = block_reach(totals.toTensor(), seq, positions);
    if (kernels_take(q)) {
      const at::Tensor e = table.contiguous(), et = table.t().contiguous();
      const at::Tensor parts = at::empty({pairs, table.size(0), positions}, q.options());
      CopeTableLaunch p = launch_of(q, e, reaches);
      p.grad = grad.data_ptr();
      p.grad_pair_stride = grad.stride(1);
      p.grad_ld = grad.stride(2);
      p.table_t = et.data_ptr();
      p.grad_q = grad_q.data_ptr();
      p.grad_table_parts = parts.data_ptr();
      cope_table_backward_cpu(p);
      return {grad_q, parts.sum(0), at::Tensor()};
    }
    at::Tensor grad_table = at::zeros_like(table, at::MemoryFormat::Contiguous);
    for (int64_t begin = 0; begin < seq; begin += kBlockRows) {
      const int64_t rows = std::min(kBlockRows, seq - begin), reach = reaches[begin / kBlockRows];
      const at::Tensor g = batched(grad.narrow(2, begin, rows).narrow(3, 0, reach));  // [B H, n, reach]
      const at::Tensor e = table.narrow(1, 0, reach);
      at::Tensor grad_rows = batched(grad_q.narrow(2, begin, rows));  // a view into grad_q
      at::bmm_out(grad_rows, g, e.t().unsqueeze(0).expand({pairs, -1, -1}));
      const at::Tensor qb = batched(q.narrow(2, begin, rows));  // [B H, n, D]
      grad_table.narrow(1, 0, reach).add_(at::bmm(qb.transpose(1, 2), g).sum(0));
    }
    return {grad_q, grad_table, at::Tensor()};
  }
};

}  // namespace

torch::Tensor causal_table_products(const torch::Tensor& q, const torch::Tensor& table,
                                    const torch::Tensor& row_totals) {
  TORCH_CHECK(q.dim() == 4 && table.dim() == 2 && table.size(0) == q.size(3),
              "roformer::causal_table_products: needs q [B, H, S, D] and table [D, P], got ", q.sizes(), " and ",
              table.sizes());
  TORCH_CHECK(q.scalar_type() == table.scalar_type() && q.device() == table.device(),
              "roformer::causal_table_products: q and table differ in dtype or device");
  // One block: LibTorch's matmul folds the batch into one product, forward and backward (the
  // batched form with a broadcast table measured slower at 128 tokens).
  if (q.size(2) <= kBlockRows) {
    const int64_t reach = reachable(q.size(2), table.size(1));
    const at::Tensor out = at::matmul(q, table.narrow(1, 0, reach));
    return reach == table.size(1) ? out : at::constant_pad_nd(out, {0, table.size(1) - reach});
  }
  const at::Tensor qc = q.contiguous();
  if (!at::GradMode::is_enabled() || (!q.requires_grad() && !table.requires_grad()))
    return table_products_forward(qc, table);
  const bool totals = row_totals.defined() && row_totals.sizes() == q.sizes().slice(0, 3) && row_totals.is_cpu();
  return CausalTableProducts::apply(qc, table, totals ? row_totals : at::empty({0}, q.options()));
}

}  // namespace roformer::ops
