// PaTH's sweep across key blocks as an autograd Function (see path_sweep.h).
#include "roformer/model/position/path_sweep.h"

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

}  // namespace

torch::Tensor path_sweep(const torch::Tensor& rows, const torch::Tensor& carried, const torch::Tensor& product,
                         int64_t first) {
  return PathSweepFunction::apply(rows.contiguous(), carried.contiguous(), product.contiguous(), first);
}

}  // namespace roformer::model
