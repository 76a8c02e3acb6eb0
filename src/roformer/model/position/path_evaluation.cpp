// PaTH's attention in evaluation by LibTorch ops, the sweep with an online softmax (see
// path_evaluation.h).
#include "roformer/model/position/path_evaluation.h"

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <limits>
#include <vector>

namespace roformer::model {
namespace {

// The running state of every query block's rows: maximum and sum [n, BH, b], output [n, BH, b, D].
struct OnlineSoftmax {
  torch::Tensor top, sum, out;
  // Takes the scores s [count, BH, b, b] (overwritten) of query blocks [first, first + count)
  // with their values [count, BH, b, D].
  void add(int64_t first, torch::Tensor& s, const torch::Tensor& values) {
    const int64_t count = s.size(0);
    torch::Tensor top_part = top.narrow(0, first, count);
    const torch::Tensor grown = at::maximum(top_part, std::get<0>(s.max(-1)));
    const torch::Tensor rescale = (top_part - grown).exp_();
    s.sub_(grown.unsqueeze(-1)).exp_();
    sum.narrow(0, first, count).mul_(rescale).add_(s.sum(-1));
    out.narrow(0, first, count).mul_(rescale.unsqueeze(-1)).add_(at::matmul(s, values));
    top_part.copy_(grown);
  }
};

}  // namespace

torch::Tensor path_attention_by_sweep(const PathSweepBlocks& blocks, double scale) {
  torch::NoGradGuard no_grad;
  const int64_t n = blocks.own.size(0), BH = blocks.own.size(1), b = blocks.own.size(2), D = blocks.values.size(3);
  const std::vector<int64_t> own_shape{n, BH, b, b}, rows_shape{n, BH, b, D}, product_shape{n, BH, D, D};
  auto shaped = [](const torch::Tensor& t, const std::vector<int64_t>& shape) { return t.sizes() == shape; };
  TORCH_CHECK(shaped(blocks.own, own_shape) && shaped(blocks.rows, rows_shape) && shaped(blocks.carried, rows_shape) &&
                  shaped(blocks.values, rows_shape) && shaped(blocks.product, product_shape) &&
                  (!blocks.gate.defined() || shaped(blocks.gate, {n, BH, b})),
              "path_attention_by_sweep: own [n, BH, b, b], rows, carried and values [n, BH, b, D], product "
              "[n, BH, D, D] and gate [n, BH, b]; got own ",
              blocks.own.sizes(), " and values ", blocks.values.sizes());
  const torch::Tensor& values = blocks.values;
  const torch::Tensor c = blocks.gate.defined() ? blocks.gate * scale : torch::Tensor();
  auto gated = [&](torch::Tensor& s, int64_t first, int64_t source) {  // + c_i - c_j, both scaled
    const int64_t count = s.size(0);
    if (c.defined()) s.add_(c.narrow(0, first, count).unsqueeze(-1) - c.narrow(0, source, count).unsqueeze(-2));
  };
  // Each query block's own keys, j <= i.
  torch::Tensor own = blocks.own * scale;
  gated(own, 0, 0);
  own.masked_fill_(torch::ones({b, b}, values.options().dtype(torch::kBool)).triu(1),
                   -std::numeric_limits<double>::infinity());
  OnlineSoftmax state;
  state.top = std::get<0>(own.max(-1));
  own.sub_(state.top.unsqueeze(-1)).exp_();
  state.sum = own.sum(-1);
  state.out = at::matmul(own, values);
  // Distance d: query blocks d .. n - 1 (carried to the end of key blocks 0 .. n - 1 - d).
  torch::Tensor rows = blocks.rows;
  for (int64_t d = 1; d < n; ++d) {
    const int64_t count = n - d;
    torch::Tensor s = at::matmul(rows.narrow(0, d, count), blocks.carried.narrow(0, 0, count).transpose(-1, -2));
    s.mul_(scale);
    gated(s, d, 0);
    state.add(d, s, values.narrow(0, 0, count));
    if (count > 1) {  // the rows that go on absorb their key block's product
      torch::Tensor next = rows.narrow(0, d + 1, count - 1);
      next.copy_(at::matmul(next, blocks.product.narrow(0, 1, count - 1)));
    }
  }
  return state.out.div_(state.sum.unsqueeze(-1));
}

}  // namespace roformer::model
