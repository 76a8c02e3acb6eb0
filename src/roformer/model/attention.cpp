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
  const int64_t B = x.size(0), S = x.size(1);
  auto split_heads = [&](const torch::Tensor& t) { return t.view({B, S, heads_, head_dim_}).transpose(1, 2); };
  torch::Tensor q = split_heads(self->query->forward(x));  // [B, H, S, D]
  torch::Tensor k = split_heads(self->key->forward(x));
  torch::Tensor v = split_heads(self->value->forward(x));
  position_->rotate(q, k, v, ctx.positions);
  std::optional<at::Tensor> mask;
  if (ctx.mask.defined()) mask = ctx.mask.to(q.scalar_type());
  const double p = is_training() ? dropout_ : 0.0;
  const torch::Tensor out =
      at::scaled_dot_product_attention(q, k, v, mask, p, /*is_causal=*/!ctx.mask.defined() && ctx.causal);
  return output->dense->forward(out.transpose(1, 2).reshape({B, S, heads_ * head_dim_}));
}

}  // namespace roformer::model
