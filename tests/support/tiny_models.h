// Test helpers shared by the attention and position-family unit tests: the tiny model config
// they build (two layers, 16 wide, two heads of 8, no dropout) and a FIRE MLP whose
// piecewise-linear form has flat units (one never switches: its kink is +inf).
#pragma once

#include <torch/torch.h>

#include "roformer/config/config.h"
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

}  // namespace tiny_models
