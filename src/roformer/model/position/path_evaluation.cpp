// PaTH's attention in evaluation by LibTorch ops, the sweep with an online softmax (see
// path_evaluation.h).
#include "roformer/model/position/path_evaluation.h"

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <limits>
#include <vector>

namespace roformer::model {
namespace {

// x [B, H, S, ...] -> [n, B * H, b, ...]: padded with zeros to n * b tokens, block-major.
torch::Tensor to_blocks(const torch::Tensor& x, int64_t n, int64_t b) {
  const int64_t B = x.size(0), H = x.size(1), S = x.size(2);
  const torch::Tensor rows = x.dim() == 3 ? x.unsqueeze(-1) : x;
  const torch::Tensor padded = S == n * b ? rows : at::constant_pad_nd(rows, {0, 0, 0, n * b - S});
  torch::Tensor blocks = padded.reshape({B, H, n, b, rows.size(3)}).permute({2, 0, 1, 3, 4}).reshape({n, B * H, b, -1});
  return x.dim() == 3 ? blocks.squeeze(-1) : blocks;
}

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

torch::Tensor path_attention_by_sweep(const PathSweepBlocks& blocks, const torch::Tensor& v, const torch::Tensor& gate,
                                      double scale) {
  torch::NoGradGuard no_grad;
  const int64_t B = v.size(0), H = v.size(1), S = v.size(2), D = v.size(3);
  const int64_t n = blocks.own.size(0), b = blocks.own.size(2);
  TORCH_CHECK(
      n * b >= S && (n - 1) * b < S && blocks.rows.sizes() == at::IntArrayRef({n, B * H, b, D}) &&
          blocks.carried.sizes() == blocks.rows.sizes() &&
          blocks.product.sizes() == at::IntArrayRef({n, B * H, D, D}) &&
          (!gate.defined() || gate.sizes() == v.sizes().slice(0, 3)),
      "path_attention_by_sweep: blocks of v's ", S, " tokens and B * H = ", B * H,
      " (own [n, BH, b, b], rows and carried [n, BH, b, D], product [n, BH, D, D]) and gate [B, H, S]; got own ",
      blocks.own.sizes(), " and v ", v.sizes());
  const torch::Tensor values = to_blocks(v, n, b);
  const torch::Tensor c = gate.defined() ? to_blocks(gate * scale, n, b) : torch::Tensor();
  auto gated = [&](torch::Tensor& s, int64_t first, int64_t source) {  // + c_i - c_j, both scaled
    const int64_t count = s.size(0);
    if (c.defined()) s.add_(c.narrow(0, first, count).unsqueeze(-1) - c.narrow(0, source, count).unsqueeze(-2));
  };
  // Each query block's own keys, j <= i.
  torch::Tensor own = blocks.own * scale;
  gated(own, 0, 0);
  own.masked_fill_(torch::ones({b, b}, v.options().dtype(torch::kBool)).triu(1),
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
  const torch::Tensor out = state.out.div_(state.sum.unsqueeze(-1));
  return out.view({n, B, H, b, D}).permute({1, 2, 0, 3, 4}).reshape({B, H, n * b, D}).narrow(2, 0, S);
}

}  // namespace roformer::model
