// PaTH's attention in blocks: its checks and its autograd Function (see path_blocks.h).
#include "roformer/ops/tile_attention/path_blocks.h"

#include <torch/autograd.h>

#include <algorithm>
#include <vector>

#include "roformer/ops/common/kernel_dtype_torch.h"
#include "roformer/ops/tile_attention/path_blocks_kernels.h"
#include "roformer/ops/tile_attention/tile_attention.h"

namespace roformer::ops {
namespace {

// x [B, H, S, W] with contiguous rows (else a contiguous copy), its rows as the kernels take them.
torch::Tensor with_contiguous_rows(const torch::Tensor& x) {
  return x.stride(3) == 1 ? x : x.contiguous();
}
PairRows rows_of(const torch::Tensor& x) {
  return {x.data_ptr(), x.size(1), x.stride(0), x.stride(1), x.stride(2)};
}

// A new [B, H, S, W] whose memory is [B, S, H, W], as the projections' views are: gradients
// handed back this way reach the projection's [B, S, H * W] without a copy.
torch::Tensor tokens_major(int64_t B, int64_t H, int64_t S, int64_t W, const torch::TensorOptions& options) {
  return torch::empty({B, S, H, W}, options).transpose(1, 2);
}

class PathInputsFunction : public torch::autograd::Function<PathInputsFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q_in,
                                                const torch::Tensor& k_in, const torch::Tensor& state_in,
                                                int64_t block) {
    const torch::Tensor q = with_contiguous_rows(q_in), k = with_contiguous_rows(k_in),
                        state = with_contiguous_rows(state_in);
    const int64_t BH = q.size(0) * q.size(1), S = q.size(2), D = q.size(3);
    const int64_t b = std::min(block, (S + 7) / 8 * 8), n = (S + b - 1) / b;
    const auto opts = q.options();
    torch::Tensor own = torch::empty({n, BH, b, b}, opts), rows = torch::empty({n, BH, b, D}, opts),
                  carried = torch::empty({n, BH, b, D}, opts), product = torch::empty({n, BH, D, D}, opts),
                  saved = torch::empty({n, BH, path_inputs_saved_size(b, D)}, opts);
    PathInputsLaunch p = inputs_launch(q, k, state, saved, b);
    p.own = own.data_ptr();
    p.rows = rows.data_ptr();
    p.carried = carried.data_ptr();
    p.product = product.data_ptr();
    path_inputs_forward_cpu(p);
    ctx->save_for_backward({q, k, state, saved});
    ctx->saved_data["block"] = b;
    return {own, rows, carried, product};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const std::vector<torch::Tensor> s = ctx->get_saved_variables();
    const torch::Tensor &q = s[0], &state = s[2];
    const int64_t n = s[3].size(0), BH = s[3].size(1), b = ctx->saved_data["block"].toInt(), D = q.size(3);
    const std::vector<int64_t> sizes[4] = {{n, BH, b, b}, {n, BH, b, D}, {n, BH, b, D}, {n, BH, D, D}};
    for (size_t i = 0; i < 4; ++i)
      grads[i] = grads[i].defined() ? grads[i].contiguous() : torch::zeros(sizes[i], q.options());
    const int64_t B = q.size(0), H = q.size(1), S = q.size(2);
    torch::Tensor d_q = tokens_major(B, H, S, D, q.options()), d_k = tokens_major(B, H, S, D, q.options()),
                  d_state = tokens_major(B, H, S, state.size(3), q.options());
    PathInputsLaunch p = inputs_launch(q, s[1], state, s[3], b);
    p.d_own = grads[0].data_ptr();
    p.d_rows = grads[1].data_ptr();
    p.d_carried = grads[2].data_ptr();
    p.d_product = grads[3].data_ptr();
    p.d_q = rows_of(d_q);
    p.d_k = rows_of(d_k);
    p.d_state = rows_of(d_state);
    path_inputs_backward_cpu(p);
    return {d_q, d_k, d_state, torch::Tensor()};
  }

 private:
  static PathInputsLaunch inputs_launch(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& state,
                                        const torch::Tensor& saved, int64_t b) {
    PathInputsLaunch p;
    p.dtype = to_kernel_dtype(q.scalar_type(), "roformer::path_blocks");
    p.pairs = q.size(0) * q.size(1);
    p.blocks = saved.size(0);
    p.block = b;
    p.head_dim = q.size(3);
    p.length = q.size(2);
    p.q = rows_of(q);
    p.k = rows_of(k);
    p.state = rows_of(state);
    p.state_width = state.size(3);
    p.saved = saved.data_ptr();
    return p;
  }
};

PathBlockLaunch launch_for(const std::vector<torch::Tensor>& blocks, const torch::Tensor& v, double scale) {
  PathBlockLaunch p;
  p.dtype = to_kernel_dtype(v.scalar_type(), "roformer::path_block_attention");
  p.blocks = blocks[0].size(0);
  p.pairs = blocks[0].size(1);
  p.block = blocks[0].size(2);
  p.head_dim = blocks[1].size(3);
  p.length = v.size(2);
  p.scale = scale;
  p.own = blocks[0].data_ptr();
  p.rows = blocks[1].data_ptr();
  p.carried = blocks[2].data_ptr();
  p.product = blocks[3].data_ptr();
  p.v = rows_of(v);
  return p;
}

class PathBlockFunction : public torch::autograd::Function<PathBlockFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& own,
                               const torch::Tensor& rows, const torch::Tensor& carried, const torch::Tensor& product,
                               const torch::Tensor& v_in, const torch::Tensor& gate_in, double scale) {
    const std::vector<torch::Tensor> blocks{own.contiguous(), rows.contiguous(), carried.contiguous(),
                                            product.contiguous()};
    const torch::Tensor v = with_contiguous_rows(v_in);
    const int64_t B = v.size(0), H = v.size(1), S = v.size(2), D = v.size(3), padded = own.size(0) * own.size(2);
    const torch::Tensor carried_t = blocks[2].transpose(-1, -2).contiguous();
    const bool gated = gate_in.numel() > 0;           // no gate: an empty tensor (apply takes no undefined one)
    const torch::Tensor gate = gate_in.contiguous();  // [B, H, S]: each value read by many products
    torch::Tensor out = tokens_major(B, H, S, D, v.options()), lse = torch::empty({B * H, padded}, v.options());
    PathBlockLaunch p = launch_for(blocks, v, scale);
    p.carried_t = carried_t.data_ptr();
    if (gated) p.gate = gate.data_ptr();
    p.out = rows_of(out);
    p.lse = lse.data_ptr();
    path_block_forward_cpu(p);
    std::vector<torch::Tensor> saved = blocks;
    saved.insert(saved.end(), {v, out, lse, gate, carried_t});
    ctx->save_for_backward(saved);
    ctx->saved_data["scale"] = scale;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
    const torch::Tensor &v = saved[4], &out = saved[5], &lse = saved[6], &gate = saved[7], &carried_t = saved[8];
    const bool gated = gate.numel() > 0;
    const int64_t B = v.size(0), H = v.size(1), S = v.size(2), D = v.size(3);
    const torch::Tensor d_out = with_contiguous_rows(grads[0].to(v.scalar_type()));
    const torch::Tensor product_t = saved[3].transpose(-1, -2).contiguous();
    const torch::Tensor vt = transposed_keys(v, saved[0].size(0) * saved[0].size(2));  // [B, H, D, n * b]
    torch::Tensor d_own = torch::empty_like(saved[0]), d_rows = torch::empty_like(saved[1]),
                  d_carried = torch::empty_like(saved[2]), d_product = torch::empty_like(saved[3]),
                  d_v = tokens_major(B, H, S, D, v.options()), delta = torch::empty_like(lse),
                  d_gate = gated ? torch::zeros_like(lse) : torch::Tensor();
    PathBlockLaunch p = launch_for(saved, v, ctx->saved_data["scale"].toDouble());
    p.carried_t = carried_t.data_ptr();
    p.product_t = product_t.data_ptr();
    p.vt = vt.data_ptr();
    if (gated) p.gate = gate.data_ptr();
    p.out = rows_of(out);
    p.lse = lse.data_ptr();
    p.grad_out = rows_of(d_out);
    p.delta = delta.data_ptr();
    p.d_own = d_own.data_ptr();
    p.d_rows = d_rows.data_ptr();
    p.d_carried = d_carried.data_ptr();
    p.d_product = d_product.data_ptr();
    p.d_v = rows_of(d_v);
    p.d_gate = gated ? d_gate.data_ptr() : nullptr;
    path_block_backward_cpu(p);
    const torch::Tensor gate_grad = gated ? d_gate.narrow(1, 0, S).reshape({B, H, S}) : torch::Tensor();
    return {d_own, d_rows, d_carried, d_product, d_v, gate_grad, torch::Tensor()};
  }
};

}  // namespace

bool path_block_attention_takes(const torch::Tensor& v, int64_t block) {
  const auto dtype = v.scalar_type();
  return v.is_cpu() && v.dim() == 4 && (dtype == torch::kFloat32 || dtype == torch::kFloat64) && v.size(3) % 8 == 0 &&
         block % 8 == 0;
}

PathBlocks path_blocks(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& state, int64_t block) {
  TORCH_CHECK(
      path_block_attention_takes(q, block) && k.sizes() == q.sizes() && state.dim() == 4 &&
          state.sizes().slice(0, 3) == q.sizes().slice(0, 3) && state.size(3) > q.size(3),
      "roformer::path_blocks: needs q, k [B, H, S, D] and the state [B, H, S, > D] on the CPU with head dim and "
      "block multiples of 8, got q ",
      q.sizes(), ", k ", k.sizes(), ", state ", state.sizes(), ", block ", block);
  for (const torch::Tensor& t : {k, state})
    TORCH_CHECK(t.scalar_type() == q.scalar_type() && t.is_cpu(),
                "roformer::path_blocks: every tensor on the CPU in q's dtype ", q.scalar_type(), ", got ",
                t.scalar_type());
  const torch::autograd::variable_list out = PathInputsFunction::apply(q, k, state, block);
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
