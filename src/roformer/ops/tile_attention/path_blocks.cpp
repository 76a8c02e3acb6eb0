// PaTH's attention in blocks: its checks and its autograd Function (see path_blocks.h).
#include "roformer/ops/tile_attention/path_blocks.h"

#include <torch/autograd.h>

#include <algorithm>

#include <vector>

#include "roformer/ops/common/kernel_dtype_torch.h"
#include "roformer/ops/tile_attention/path_blocks_kernels.h"

namespace roformer::ops {
namespace {

// x [B, H, S, ...] as [B * H, padded, ...] contiguous, zero past S.
torch::Tensor per_pair(const torch::Tensor& x, int64_t padded) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape.erase(shape.begin());
  shape[0] = x.size(0) * x.size(1);
  torch::Tensor flat = x.reshape(shape);
  if (x.size(2) == padded) return flat.contiguous();
  shape[1] = padded;
  torch::Tensor out = torch::zeros(shape, x.options());
  out.narrow(1, 0, x.size(2)).copy_(flat);
  return out;
}

// The inverse for the gradients: [B * H, padded, ...] -> [B, H, S, ...] (`shape`).
torch::Tensor per_batch(const torch::Tensor& x, at::IntArrayRef shape) {
  return x.narrow(1, 0, shape[2]).reshape(shape);
}
torch::Tensor per_batch(const torch::Tensor& x, const torch::Tensor& like) {
  return per_batch(x, like.sizes());
}

class PathInputsFunction : public torch::autograd::Function<PathInputsFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q,
                                                const torch::Tensor& k, const torch::Tensor& w,
                                                const torch::Tensor& beta, int64_t block) {
    const int64_t BH = q.size(0) * q.size(1), S = q.size(2), D = q.size(3);
    const int64_t b = std::min(block, (S + 7) / 8 * 8), n = (S + b - 1) / b;
    const auto opts = q.options();
    const torch::Tensor qp = per_pair(q, n * b), kp = per_pair(k, n * b), wp = per_pair(w, n * b),
                        bp = per_pair(beta, n * b);
    torch::Tensor own = torch::empty({n, BH, b, b}, opts), rows = torch::empty({n, BH, b, D}, opts),
                  carried = torch::empty({n, BH, b, D}, opts), product = torch::empty({n, BH, D, D}, opts),
                  transform = torch::empty({n, BH, b, b}, opts), reach = torch::empty({n, BH, b, b}, opts);
    PathInputsLaunch p = inputs_launch(qp, kp, wp, bp, transform, reach, n, b);
    p.own = own.data_ptr();
    p.rows = rows.data_ptr();
    p.carried = carried.data_ptr();
    p.product = product.data_ptr();
    path_inputs_forward_cpu(p);
    ctx->save_for_backward({qp, kp, wp, bp, transform, reach});
    ctx->saved_data["shape"] = q.sizes().vec();
    return {own, rows, carried, product};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const std::vector<torch::Tensor> s = ctx->get_saved_variables();
    const std::vector<int64_t> shape = ctx->saved_data["shape"].toIntVector();
    const int64_t n = s[4].size(0), b = s[4].size(2), D = s[0].size(2);
    const std::vector<int64_t> sizes[4] = {
        {n, s[0].size(0), b, b}, {n, s[0].size(0), b, D}, {n, s[0].size(0), b, D}, {n, s[0].size(0), D, D}};
    for (size_t i = 0; i < 4; ++i)
      grads[i] = grads[i].defined() ? grads[i].contiguous() : torch::zeros(sizes[i], s[0].options());
    torch::Tensor d_q = torch::empty_like(s[0]), d_k = torch::empty_like(s[0]), d_w = torch::empty_like(s[0]),
                  d_beta = torch::empty_like(s[3]);
    PathInputsLaunch p = inputs_launch(s[0], s[1], s[2], s[3], s[4], s[5], n, b);
    p.d_own = grads[0].data_ptr();
    p.d_rows = grads[1].data_ptr();
    p.d_carried = grads[2].data_ptr();
    p.d_product = grads[3].data_ptr();
    p.d_q = d_q.data_ptr();
    p.d_k = d_k.data_ptr();
    p.d_w = d_w.data_ptr();
    p.d_beta = d_beta.data_ptr();
    path_inputs_backward_cpu(p);
    const std::vector<int64_t> token_shape(shape.begin(), shape.begin() + 3);
    return {per_batch(d_q, shape), per_batch(d_k, shape), per_batch(d_w, shape), per_batch(d_beta, token_shape),
            torch::Tensor()};
  }

 private:
  static PathInputsLaunch inputs_launch(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w,
                                        const torch::Tensor& beta, const torch::Tensor& transform,
                                        const torch::Tensor& reach, int64_t n, int64_t b) {
    PathInputsLaunch p;
    p.dtype = to_kernel_dtype(q.scalar_type(), "roformer::path_blocks");
    p.pairs = q.size(0);
    p.blocks = n;
    p.block = b;
    p.head_dim = q.size(2);
    p.q = q.data_ptr();
    p.k = k.data_ptr();
    p.w = w.data_ptr();
    p.beta = beta.data_ptr();
    p.transform = transform.data_ptr();
    p.reach = reach.data_ptr();
    return p;
  }
};

PathBlockLaunch launch_for(const std::vector<torch::Tensor>& saved, const torch::Tensor& v, double scale) {
  PathBlockLaunch p;
  p.dtype = to_kernel_dtype(v.scalar_type(), "roformer::path_block_attention");
  p.blocks = saved[0].size(0);
  p.pairs = saved[0].size(1);
  p.block = saved[0].size(2);
  p.head_dim = saved[1].size(3);
  p.length = v.size(2);
  p.scale = scale;
  p.own = saved[0].data_ptr();
  p.rows = saved[1].data_ptr();
  p.carried = saved[2].data_ptr();
  p.product = saved[3].data_ptr();
  return p;
}

class PathBlockFunction : public torch::autograd::Function<PathBlockFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& own,
                               const torch::Tensor& rows, const torch::Tensor& carried, const torch::Tensor& product,
                               const torch::Tensor& v, const torch::Tensor& gate, double scale) {
    const std::vector<torch::Tensor> blocks{own.contiguous(), rows.contiguous(), carried.contiguous(),
                                            product.contiguous()};
    const int64_t padded = own.size(0) * own.size(2);
    const torch::Tensor vp = per_pair(v, padded), carried_t = blocks[2].transpose(-1, -2).contiguous();
    const bool gated = gate.numel() > 0;  // no gate: an empty tensor (apply takes no undefined one)
    const torch::Tensor gp = gated ? per_pair(gate, padded) : gate;
    torch::Tensor out = torch::zeros_like(vp), lse = torch::zeros({vp.size(0), padded}, vp.options());
    PathBlockLaunch p = launch_for(blocks, v, scale);
    p.carried_t = carried_t.data_ptr();
    p.v = vp.data_ptr();
    p.gate = gated ? gp.data_ptr() : nullptr;
    p.out = out.data_ptr();
    p.lse = lse.data_ptr();
    path_block_forward_cpu(p);
    std::vector<torch::Tensor> saved = blocks;
    saved.insert(saved.end(), {vp, out, lse, v, gp, carried_t});
    ctx->save_for_backward(saved);
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["gate"] = gated;
    return per_batch(out, v);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
    const torch::Tensor &vp = saved[4], &out = saved[5], &lse = saved[6], &v = saved[7];
    const bool gated = ctx->saved_data["gate"].toBool();
    const torch::Tensor gp = gated ? saved[8] : torch::Tensor();
    const int64_t padded = vp.size(1);
    const torch::Tensor d_out = per_pair(grads[0].to(vp.scalar_type()), padded);
    const torch::Tensor delta = (d_out * out).sum(-1).contiguous();
    const torch::Tensor &carried_t = saved[9], product_t = saved[3].transpose(-1, -2).contiguous(),
                        vt = vp.transpose(1, 2).contiguous();
    torch::Tensor d_own = torch::zeros_like(saved[0]), d_rows = torch::zeros_like(saved[1]),
                  d_carried = torch::zeros_like(saved[2]), d_product = torch::zeros_like(saved[3]),
                  d_v = torch::zeros_like(vp), d_gate = gated ? torch::zeros_like(gp) : torch::Tensor();
    PathBlockLaunch p = launch_for(saved, v, ctx->saved_data["scale"].toDouble());
    p.carried_t = carried_t.data_ptr();
    p.product_t = product_t.data_ptr();
    p.v = vp.data_ptr();
    p.vt = vt.data_ptr();
    p.gate = gated ? gp.data_ptr() : nullptr;
    p.out = out.data_ptr();
    p.lse = lse.data_ptr();
    p.grad_out = d_out.data_ptr();
    p.delta = delta.data_ptr();
    p.d_own = d_own.data_ptr();
    p.d_rows = d_rows.data_ptr();
    p.d_carried = d_carried.data_ptr();
    p.d_product = d_product.data_ptr();
    p.d_v = d_v.data_ptr();
    p.d_gate = gated ? d_gate.data_ptr() : nullptr;
    path_block_backward_cpu(p);
    const torch::Tensor gate_grad =
        gated ? d_gate.narrow(1, 0, v.size(2)).reshape(v.sizes().slice(0, 3)) : torch::Tensor();
    return {d_own, d_rows, d_carried, d_product, per_batch(d_v, v), gate_grad, torch::Tensor()};
  }
};

}  // namespace

bool path_block_attention_takes(const torch::Tensor& v, int64_t block) {
  const auto dtype = v.scalar_type();
  return v.is_cpu() && v.dim() == 4 && (dtype == torch::kFloat32 || dtype == torch::kFloat64) && v.size(3) % 8 == 0 &&
         block % 8 == 0;
}

PathBlocks path_blocks(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w,
                       const torch::Tensor& beta, int64_t block) {
  TORCH_CHECK(path_block_attention_takes(q, block) && k.sizes() == q.sizes() && w.sizes() == q.sizes() &&
                  beta.sizes() == q.sizes().slice(0, 3),
              "roformer::path_blocks: needs q, k, w [B, H, S, D] and beta [B, H, S] on the CPU with head dim and block "
              "multiples of 8, got q ",
              q.sizes(), ", k ", k.sizes(), ", w ", w.sizes(), ", beta ", beta.sizes(), ", block ", block);
  for (const torch::Tensor& t : {k, w, beta})
    TORCH_CHECK(t.scalar_type() == q.scalar_type() && t.is_cpu(),
                "roformer::path_blocks: every tensor on the CPU in q's dtype ", q.scalar_type(), ", got ",
                t.scalar_type());
  const torch::autograd::variable_list out = PathInputsFunction::apply(q, k, w, beta, block);
  return {out[0], out[1], out[2], out[3]};
}

torch::Tensor path_block_attention(const PathBlocks& blocks, const torch::Tensor& v, const torch::Tensor& gate,
                                   double scale) {
  const int64_t n = blocks.own.size(0), BH = v.size(0) * v.size(1), b = blocks.own.size(2), D = v.size(3);
  TORCH_CHECK(path_block_attention_takes(v, b),
              "roformer::path_block_attention: needs CPU float or double with head "
              "dim and block multiples of 8, got v ",
              v.sizes(), " ", v.scalar_type(), " on ", v.device(), ", block ", b);
  TORCH_CHECK(
      blocks.own.sizes() == at::IntArrayRef({n, BH, b, b}) && blocks.rows.sizes() == at::IntArrayRef({n, BH, b, D}) &&
          blocks.carried.sizes() == blocks.rows.sizes() && blocks.product.sizes() == at::IntArrayRef({n, BH, D, D}) &&
          n * b >= v.size(2) && (n - 1) * b < v.size(2),
      "roformer::path_block_attention: blocks of own ", blocks.own.sizes(), ", rows ", blocks.rows.sizes(),
      ", carried ", blocks.carried.sizes(), ", product ", blocks.product.sizes(), " do not fit v ", v.sizes());
  TORCH_CHECK(!gate.defined() || gate.sizes() == v.sizes().slice(0, 3),
              "roformer::path_block_attention: gate must be [B, H, S] for v ", v.sizes());
  for (const torch::Tensor& t : {blocks.own, blocks.rows, blocks.carried, blocks.product, gate})
    TORCH_CHECK(!t.defined() || t.scalar_type() == v.scalar_type(),
                "roformer::path_block_attention: every tensor in v's dtype ", v.scalar_type(), ", got ",
                t.scalar_type());
  return PathBlockFunction::apply(blocks.own, blocks.rows, blocks.carried, blocks.product, v,
                                  gate.defined() ? gate : torch::empty({0}, v.options()), scale);
}

}  // namespace roformer::ops
