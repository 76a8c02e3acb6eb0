// Self-attention (see attention.h).
#include "roformer/model/attention.h"

#include <ATen/ATen.h>
#include <torch/torch.h>

namespace roformer::model {

SelfAttentionProjImpl::SelfAttentionProjImpl(int64_t hidden) {
  query = register_module("query", torch::nn::Linear(hidden, hidden));
  key = register_module("key", torch::nn::Linear(hidden, hidden));
  value = register_module("value", torch::nn::Linear(hidden, hidden));
}

DenseNormImpl::DenseNormImpl(int64_t in, int64_t out, double eps) {
  dense = register_module("dense", torch::nn::Linear(in, out));
  LayerNorm = register_module("LayerNorm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({out}).eps(eps)));
}

AttentionImpl::AttentionImpl(const config::ModelConfig& c, std::shared_ptr<PositionEncodingImpl> position)
    : heads_(c.num_heads), head_dim_(c.head_dim()), dropout_(c.attention_dropout), position_(std::move(position)) {
  self = register_module("self", SelfAttentionProj(c.hidden_size));
  output = register_module("output", DenseNorm(c.hidden_size, c.hidden_size, c.layer_norm_eps));
}

torch::Tensor AttentionImpl::attend(const torch::Tensor& x, const AttentionContext& ctx) {
  const int64_t B = x.size(0), S = x.size(1), width = heads_ * head_dim_;
  // One projection for q, k and v: one matmul (one input cast under autocast, one input
  // gradient in backward) instead of three; the parameters stay three Linears (HF names).
  const torch::Tensor w = torch::cat({self->query->weight, self->key->weight, self->value->weight});
  const torch::Tensor b = torch::cat({self->query->bias, self->key->bias, self->value->bias});
  const std::vector<torch::Tensor> qkv = at::linear(x, w, b).split(width, -1);  // 3 x [B, S, H*D]
  auto split_heads = [&](const torch::Tensor& t) { return t.view({B, S, heads_, head_dim_}).transpose(1, 2); };
  torch::Tensor q = split_heads(qkv[0]);  // [B, H, S, D] views of the projection, no copies
  torch::Tensor k = split_heads(qkv[1]);
  torch::Tensor v = split_heads(qkv[2]);
  position_->rotate(q, k, v, ctx.positions);
  std::optional<at::Tensor> mask;
  if (ctx.mask.defined()) mask = ctx.mask.to(q.scalar_type());
  const double p = is_training() ? dropout_ : 0.0;
  const torch::Tensor out =
      at::scaled_dot_product_attention(q, k, v, mask, p, /*is_causal=*/!ctx.mask.defined() && ctx.causal);
  return dense(output->dense, out.transpose(1, 2).reshape({B, S, width}));
}

}  // namespace roformer::model
