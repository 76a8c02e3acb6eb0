// PaTH's sweep across key blocks as an autograd Function (see path_sweep.h).
#include "roformer/model/position/path_sweep.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/bmm.h>
#include <torch/autograd.h>

#include <algorithm>

namespace roformer::model {

std::vector<PathSweepStep> path_sweep_steps(int64_t first, int64_t nq) {
  std::vector<PathSweepStep> steps;
  int64_t base = 0;
  for (int64_t d = 1; d < first + nq; ++d) {
    const int64_t lowest = std::max(first, d) - first;
    steps.push_back({lowest, nq - lowest, first + lowest - d, base});
    base += nq - lowest;
  }
  return steps;
}

namespace {

// Blocks [from, from + count) of a block-major x [n, BH, r, c] as one batch [count * BH, r, c].
torch::Tensor batch(const torch::Tensor& x, int64_t from, int64_t count) {
  return x.narrow(0, from, count).flatten(0, 1);
}

class PathSweepFunction : public torch::autograd::Function<PathSweepFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& rows,
                               const torch::Tensor& carried, const torch::Tensor& product, int64_t first) {
    const std::vector<PathSweepStep> steps = path_sweep_steps(first, rows.size(0));
    const int64_t BH = rows.size(1), b = rows.size(2), D = rows.size(3);
    const int64_t total = steps.empty() ? 0 : steps.back().base + steps.back().count;
    torch::Tensor scores = torch::empty({total, BH, b, b}, rows.options());
    torch::Tensor walked = torch::empty({total, BH, b, D}, rows.options());  // each step's rows
    for (size_t i = 0; i < steps.size(); ++i) {
      const PathSweepStep& s = steps[i];
      if (i == 0) walked.narrow(0, 0, s.count).copy_(rows.narrow(0, s.lowest, s.count));
      torch::Tensor out = batch(scores, s.base, s.count);
      at::bmm_out(out, batch(walked, s.base, s.count), batch(carried, s.source, s.count).transpose(1, 2));
      if (i + 1 == steps.size()) break;
      const PathSweepStep& t = steps[i + 1];  // its rows: this step's from t.lowest, times the products
      const int64_t shift = t.lowest - s.lowest;
      torch::Tensor next = batch(walked, t.base, t.count);
      at::bmm_out(next, batch(walked, s.base + shift, t.count), batch(product, s.source + shift, t.count));
    }
    ctx->save_for_backward({walked, carried, product});
    ctx->saved_data["first"] = first;
    ctx->saved_data["rows"] = rows.size(0);
    return scores;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &walked = saved[0], &carried = saved[1], &product = saved[2];
    const int64_t nq = ctx->saved_data["rows"].toInt();
    const std::vector<PathSweepStep> steps = path_sweep_steps(ctx->saved_data["first"].toInt(), nq);
    torch::Tensor d_rows = torch::zeros({nq, carried.size(1), carried.size(2), carried.size(3)}, carried.options());
    torch::Tensor d_carried = torch::zeros_like(carried), d_product = torch::zeros_like(product);
    if (steps.empty() || !grads[0].defined()) return {d_rows, d_carried, d_product, torch::Tensor()};
    const torch::Tensor d_scores = grads[0].contiguous();
    torch::Tensor d_next;  // the next step's rows' gradient [count * BH, b, D]
    for (size_t i = steps.size(); i-- > 0;) {
      const PathSweepStep& s = steps[i];
      const torch::Tensor P = batch(walked, s.base, s.count), G = batch(d_scores, s.base, s.count);
      torch::Tensor d_P = at::bmm(G, batch(carried, s.source, s.count));
      batch(d_carried, s.source, s.count).add_(at::bmm(G.transpose(1, 2), P));
      if (d_next.defined()) {
        const PathSweepStep& t = steps[i + 1];
        const int64_t shift = t.lowest - s.lowest;
        d_P.view({s.count, -1, P.size(1), P.size(2)})
            .narrow(0, shift, t.count)
            .flatten(0, 1)
            .add_(at::bmm(d_next, batch(product, s.source + shift, t.count).transpose(1, 2)));
        batch(d_product, s.source + shift, t.count)
            .add_(at::bmm(batch(walked, s.base + shift, t.count).transpose(1, 2), d_next));
      }
      d_next = d_P;
    }
    batch(d_rows, steps[0].lowest, steps[0].count).add_(d_next);
    return {d_rows, d_carried, d_product, torch::Tensor()};
  }
};

// Where each score block goes: (query block r, key block m) <- block `source` of own (d = 0) or of
// earlier (offset by own's count), for every key block m <= first + r.
struct Placement {
  int64_t r, m, source;
  bool own;
};
std::vector<Placement> placements(int64_t first, int64_t nq, int64_t n) {
  const std::vector<PathSweepStep> steps = path_sweep_steps(first, nq);
  std::vector<Placement> out;
  for (int64_t r = 0; r < nq; ++r)
    for (int64_t m = 0; m <= std::min(first + r, n - 1); ++m) {
      const int64_t d = first + r - m;
      out.push_back(d == 0 ? Placement{r, m, r, true}
                           : Placement{r, m, steps[d - 1].base + r - steps[d - 1].lowest, false});
    }
  return out;
}

// Copies every placed block between its source ([count, BH, b, b]) and the rows [BH, nq * b, n * b]:
// to the rows (to_rows, writing zeros past each row's last placed block) or back. Row by row of
// the [S, S] rows, so each row's page is visited once (block by block, every block touched b rows
// of BH pages each: at 1024 tokens a TLB miss per 128-byte copy, ten times slower).
template <typename T>
void move_blocks(const std::vector<Placement>& where, T* own, T* earlier, T* rows, int64_t BH, int64_t b, int64_t nq,
                 int64_t n, bool to_rows) {
  std::vector<std::vector<const Placement*>> by_query_block(static_cast<size_t>(nq));  // key blocks 0, 1, .. each
  for (const Placement& at : where) by_query_block[static_cast<size_t>(at.r)].push_back(&at);
  at::parallel_for(0, BH * nq, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t bh = item / nq, r = item % nq;
      const auto& blocks = by_query_block[static_cast<size_t>(r)];
      for (int64_t row = 0; row < b; ++row) {
        T* line = rows + (bh * nq * b + r * b + row) * n * b;
        for (const Placement* at : blocks) {
          T* in_block = (at->own ? own : earlier) + ((at->source * BH + bh) * b + row) * b;
          T* in_rows = line + at->m * b;
          if (to_rows) {
            std::copy(in_block, in_block + b, in_rows);
          } else {
            std::copy(in_rows, in_rows + b, in_block);
          }
        }
        if (to_rows) std::fill(line + static_cast<int64_t>(blocks.size()) * b, line + n * b, T(0));
      }
    }
  });
}

class PathRowsFunction : public torch::autograd::Function<PathRowsFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& own,
                               const torch::Tensor& earlier, int64_t first, int64_t n, int64_t B) {
    const int64_t nq = own.size(0), BH = own.size(1), b = own.size(2);
    torch::Tensor rows = torch::empty({B, BH / B, nq * b, n * b}, own.options());  // every entry written
    const std::vector<Placement> where = placements(first, nq, n);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, own.scalar_type(), "path_rows", [&] {
      move_blocks<scalar_t>(where, own.data_ptr<scalar_t>(), earlier.data_ptr<scalar_t>(), rows.data_ptr<scalar_t>(),
                            BH, b, nq, n, true);
    });
    ctx->saved_data["first"] = first;
    ctx->saved_data["n"] = n;
    ctx->saved_data["own"] = own.sizes().vec();
    ctx->saved_data["earlier"] = earlier.sizes().vec();
    return rows;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const std::vector<int64_t> own_shape = ctx->saved_data["own"].toIntVector(),
                               earlier_shape = ctx->saved_data["earlier"].toIntVector();
    const int64_t first = ctx->saved_data["first"].toInt(), n = ctx->saved_data["n"].toInt();
    const torch::Tensor d_rows = grads[0].contiguous();
    torch::Tensor d_own = torch::empty(own_shape, d_rows.options()),
                  d_earlier = torch::empty(earlier_shape, d_rows.options());
    const int64_t nq = own_shape[0], BH = own_shape[1], b = own_shape[2];
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, d_rows.scalar_type(), "path_rows_backward", [&] {
      move_blocks<scalar_t>(placements(first, nq, n), d_own.data_ptr<scalar_t>(), d_earlier.data_ptr<scalar_t>(),
                            const_cast<scalar_t*>(d_rows.data_ptr<scalar_t>()), BH, b, nq, n, false);
    });
    return {d_own, d_earlier, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor path_rows_by_gather(const torch::Tensor& own, const torch::Tensor& earlier, int64_t first, int64_t n,
                                  int64_t B) {
  const int64_t nq = own.size(0), BH = own.size(1), b = own.size(2);
  std::vector<int64_t> pick(nq * n, nq + earlier.size(0));  // past both: the zero block
  for (const Placement& at : placements(first, nq, n)) pick[at.r * n + at.m] = at.own ? at.source : nq + at.source;
  const torch::Tensor index = torch::tensor(pick, torch::dtype(torch::kLong)).to(own.device());
  const auto dtype = at::promote_types(own.scalar_type(), earlier.scalar_type());
  return torch::cat({own.to(dtype), earlier.to(dtype), torch::zeros({1, BH, b, b}, own.options().dtype(dtype))}, 0)
      .index_select(0, index)
      .view({nq, n, B, BH / B, b, b})
      .permute({2, 3, 0, 4, 1, 5})
      .reshape({B, BH / B, nq * b, n * b});
}

torch::Tensor path_rows(const torch::Tensor& own, const torch::Tensor& earlier, int64_t first, int64_t n, int64_t B) {
  if (!own.is_cpu()) return path_rows_by_gather(own, earlier, first, n, B);
  const auto dtype = at::promote_types(own.scalar_type(), earlier.scalar_type());  // autocast mixes them
  return PathRowsFunction::apply(own.to(dtype).contiguous(), earlier.to(dtype).contiguous(), first, n, B);
}

torch::Tensor path_sweep(const torch::Tensor& rows, const torch::Tensor& carried, const torch::Tensor& product,
                         int64_t first) {
  const auto dtype =
      at::promote_types(rows.scalar_type(), at::promote_types(carried.scalar_type(), product.scalar_type()));
  return PathSweepFunction::apply(rows.to(dtype).contiguous(), carried.to(dtype).contiguous(),
                                  product.to(dtype).contiguous(), first);
}

}  // namespace roformer::model
