// Test helpers shared by the attention and position-family unit tests: the tiny model config
// they build (two layers, 16 wide, two heads of 8, no dropout), that model in double with random
// token ids, and a FIRE MLP whose piecewise-linear form has flat units (one never switches: its
// kink is +inf).
#pragma once

#include <torch/torch.h>

#include <string>

#include "roformer/config/config.h"
#include "roformer/model/encoder.h"
#include "roformer/model/position/fire.h"

namespace tiny_models {

// A two-layer model 16 wide with two heads and no dropout, T5 in 8 buckets up to distance 16.
inline roformer::config::ModelConfig tiny_model(roformer::config::PositionKind kind,
                                                roformer::config::Objective objective) {
  roformer::config::ModelConfig c;
  c.objective = objective;
  c.vocab_size = 23;
  c.hidden_size = 16;
  c.num_heads = 2;
  c.num_layers = 2;
  c.ffn_size = 32;
  c.hidden_dropout = 0.0;
  c.attention_dropout = 0.0;
  c.position.kind = kind;
  c.position.t5_bias.num_buckets = 8;
  c.position.t5_bias.max_distance = 16;
  return c;
}

// FIRE's MLP (10 hidden units, `heads` outputs, seed 3) with two flat units (one on, one off)
// among rising and falling ones, its kinks -b/w within the inputs' [0, 1].
inline roformer::model::FireMlp fire_mlp_with_flat_units(int64_t heads, torch::Dtype dtype) {
  torch::manual_seed(3);
  roformer::model::FireMlp m(10, heads);
  m->to(dtype);
  torch::NoGradGuard no_grad;
  m->hidden->weight[1][0] = 0.0;
  m->hidden->bias[1] = 0.5;
  m->hidden->weight[7][0] = 0.0;
  m->hidden->bias[7] = -0.2;
  m->hidden->bias.mul_(0.3);
  return m;
}

// A model of config c in double (seed 9) with CoPE's position tables drawn from N(0, 0.5) instead
// of the authors' zeros (so its term moves the scores), and 2 x `tokens` random ids for it.
struct DoubleModel {
  roformer::model::EncoderModel model{nullptr};
  torch::Tensor ids;
};
inline DoubleModel double_model(const roformer::config::ModelConfig& c, int64_t tokens) {
  torch::manual_seed(9);
  DoubleModel d;
  d.ids = torch::randint(0, c.vocab_size, {2, tokens}, torch::kLong);
  d.model = roformer::model::build_model(c, 5);
  d.model->to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  for (auto& p : d.model->named_parameters())
    if (p.key().find("pos_emb") != std::string::npos) p.value().normal_(0.0, 0.5);
  return d;
}

}  // namespace tiny_models
