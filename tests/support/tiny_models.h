// Test helpers shared by the attention and position-family unit tests: the tiny model config
// they build (two layers, 16 wide, two heads of 8, no dropout), that model in double with random
// token ids, a FIRE MLP whose piecewise-linear form has flat units (one never switches: its
// kink is +inf), and the causal models of every family tile attention takes.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

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

// The tiny causal model with the family settings the tile tests use: FIRE's L at 8, CoPE's 24
// positions, Shaw clipped at 4 with values, DeBERTa's 8 buckets up to 32.
inline roformer::config::ModelConfig tiny_causal(roformer::config::PositionKind kind) {
  roformer::config::ModelConfig c = tiny_model(kind, roformer::config::Objective::causal_lm);
  c.position.fire.l_init = 8;
  c.position.cope.max_positions = 24;
  c.position.shaw.max_distance = 4;
  c.position.shaw.values = true;
  c.position.deberta.position_buckets = 8;
  c.position.deberta.max_relative_positions = 32;
  return c;
}

// Every model with a tile term or the tile kernel's normaliser, named: FIRE, CoPE, FoX,
// Transformer-XL, Shaw, DeBERTa, PaTH, PaTH-FoX; stick-breaking over RoPE (remainder on the query's
// value) and over NoPE (remainder dropped); ReRoPE, STRING and Self-Extend with thresholds inside
// 150 tokens, and Dual Chunk Attention (chunks of 20).
inline std::vector<std::pair<std::string, roformer::config::ModelConfig>> tile_family_models() {
  using roformer::config::PositionKind;
  namespace config = roformer::config;
  std::vector<std::pair<std::string, config::ModelConfig>> models;
  for (const auto kind : {PositionKind::fire, PositionKind::cope, PositionKind::fox, PositionKind::transformer_xl,
                          PositionKind::shaw, PositionKind::deberta, PositionKind::path})
    models.emplace_back(config::position_kind_names().name(kind), tiny_causal(kind));
  config::ModelConfig path_fox = tiny_causal(PositionKind::path);
  path_fox.position.path.forget_gate = true;
  models.emplace_back("path_fox", path_fox);
  for (const auto kind : {PositionKind::rope, PositionKind::none, PositionKind::cope, PositionKind::fox}) {
    config::ModelConfig c = tiny_causal(kind);
    c.attention_normalizer = config::AttentionNormalizer::stick_breaking;
    if (kind == PositionKind::none) c.stick_breaking_remainder = config::StickBreakingRemainder::discard;
    models.emplace_back("stick_breaking over " + config::position_kind_names().name(kind), c);
  }
  for (const auto& [name, mode] :
       std::vector<std::pair<std::string, config::RopeMode>>{{"rerope", config::RopeMode::rerope},
                                                             {"string", config::RopeMode::string},
                                                             {"self_extend", config::RopeMode::self_extend},
                                                             {"dual_chunk", config::RopeMode::dual_chunk}}) {
    config::ModelConfig c = tiny_causal(PositionKind::rope);
    c.position.rope.mode = mode;
    c.position.rope.rerope.window = 16;
    c.position.rope.string.local = 8;
    c.position.rope.self_extend.group = 4;
    c.position.rope.self_extend.window = 16;
    c.position.rope.dual_chunk.chunk_size = 24;  // chunks of 20 tokens
    c.position.rope.dual_chunk.local_window = 4;
    models.emplace_back("rope " + name, c);
  }
  return models;
}

// The models whose tile term also serves bidirectional attention, as MLM models with
// tiny_causal's settings: FIRE (its second MLP after the query), FoX, Transformer-XL, Shaw, DeBERTa.
inline std::vector<std::pair<std::string, roformer::config::ModelConfig>> bidirectional_tile_family_models() {
  using roformer::config::PositionKind;
  std::vector<std::pair<std::string, roformer::config::ModelConfig>> models;
  for (const auto kind : {PositionKind::fire, PositionKind::fox, PositionKind::transformer_xl, PositionKind::shaw,
                          PositionKind::deberta}) {
    roformer::config::ModelConfig c = tiny_causal(kind);
    c.objective = roformer::config::Objective::mlm;
    models.emplace_back(roformer::config::position_kind_names().name(kind), c);
  }
  return models;
}

}  // namespace tiny_models
