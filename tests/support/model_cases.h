// The encoder configurations the model tests run: every position family and the variants that
// change how a layer computes (RoPE's remaps and log-n, the options of 2025, the Llama, GPT-NeoX
// and Gemma 3 blocks, per-layer layouts), on a tiny model (width 8, two heads, two layers) in
// double. Shared by model_test and last_rows_test.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "roformer/config/config_loader.h"
#include "roformer/config/layer_layout.h"
#include "roformer/model/encoder.h"

namespace model_cases {

using namespace roformer;
using namespace roformer::model;
using config::PositionKind;

inline const std::vector<PositionKind> kFamilies{
    PositionKind::rope,     PositionKind::sinusoidal, PositionKind::learned, PositionKind::t5_bias,
    PositionKind::alibi,    PositionKind::none,       PositionKind::shaw,    PositionKind::transformer_xl,
    PositionKind::deberta,  PositionKind::xpos,       PositionKind::fire,    PositionKind::kerple,
    PositionKind::sandwich, PositionKind::cope,       PositionKind::fox,     PositionKind::path};

// CoPE and PaTH are defined for causal attention only (config validation refuses them with MLM).
inline bool defined_for(PositionKind kind, config::Objective objective) {
  return (kind != PositionKind::cope && kind != PositionKind::path) || objective == config::Objective::causal_lm;
}
inline bool defined_for(const config::ModelConfig& c) {
  const bool causal_only = c.attention_normalizer == config::AttentionNormalizer::stick_breaking ||
                           c.position.rope.mode == config::RopeMode::dual_chunk;
  return defined_for(c.position.kind, c.objective) && (!causal_only || c.objective == config::Objective::causal_lm);
}

inline std::string name(PositionKind k) {
  return config::position_kind_names().name(k);
}

inline config::ModelConfig tiny(PositionKind kind, config::Objective objective) {
  config::ModelConfig c;
  c.objective = objective;
  c.vocab_size = 11;
  c.hidden_size = 8;
  c.num_heads = 2;
  c.num_layers = 2;
  c.ffn_size = 16;
  c.hidden_dropout = 0.0;
  c.attention_dropout = 0.0;
  c.layer_norm_eps = 1e-5;
  c.position.kind = kind;
  c.position.max_positions = 16;
  c.position.t5_bias.num_buckets = 8;
  c.position.t5_bias.max_distance = 16;
  c.position.shaw.max_distance = 3;  // distances past 3 share a row within the 9-10 token inputs
  c.position.deberta.position_buckets = 4;
  c.position.deberta.max_relative_positions = 8;
  c.position.xpos.scale_base = 4;  // a strong decay, so a wrong sign or scale shows
  c.position.fire.mlp_width = 4;
  c.position.fire.l_init = 3;  // below the inputs' lengths: the per-query normaliser is exercised
  c.position.fire.shared_layers = false;
  c.position.sandwich.dim = c.head_dim();
  c.position.cope.max_positions = 5;  // counts clamp within the 9-10 token inputs
  c.position.path.rank = 3;
  c.position.path.block = 3;  // several blocks within the inputs
  c.position.rope.rotary_dim = c.head_dim();
  c.position.rope.scaling.original_max_positions = 16;
  return c;
}

// `c` with a resolved per-layer layout of `preset` over `layers` layers with local windows of `window`.
inline void with_layout(config::ModelConfig& c, config::LayoutPreset preset, int64_t layers, int64_t window) {
  config::Config full;
  full.model = c;
  full.model.num_layers = layers;
  full.model.layout.preset = preset;
  full.model.layout.local.window = window;
  config::resolve_layout(full);
  c = full.model;
}

// Every family, and the RoPE variants that change how attention scores (ReRoPE, Leaky ReRoPE,
// log-n): the suites below run them all.
struct Case {
  std::string name;
  PositionKind kind;
  std::function<void(config::ModelConfig&)> tweak;
};

inline std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (PositionKind kind : kFamilies) out.push_back({name(kind), kind, nullptr});
  // The layer's other parts: Llama's block (pre-RMSNorm, SwiGLU, no biases, no embedding norm, an
  // untied linear head) and a post-norm GeGLU.
  out.push_back({"rope+llama_block", PositionKind::rope, [](config::ModelConfig& c) {
                   c.norm = config::NormPlacement::pre;
                   c.norm_kind = config::NormKind::rms_norm;
                   c.feed_forward = config::FeedForwardKind::glu;
                   c.activation = config::Activation::silu;
                   c.num_kv_heads = 1;  // multi-query attention
                   c.qkv_bias = c.output_bias = c.ffn_bias = false;
                   c.embedding_norm = false;
                   c.lm_head = config::LmHeadKind::linear;
                   c.tie_output = false;
                 }});
  out.push_back({"alibi+post_rms_geglu", PositionKind::alibi, [](config::ModelConfig& c) {
                   c.norm_kind = config::NormKind::rms_norm;
                   c.feed_forward = config::FeedForwardKind::glu;
                 }});
  out.push_back({"rope+rerope", PositionKind::rope, [](config::ModelConfig& c) {
                   c.position.rope.mode = config::RopeMode::rerope;
                   c.position.rope.rerope.window = 3;
                 }});
  out.push_back({"rope+leaky_rerope", PositionKind::rope, [](config::ModelConfig& c) {
                   c.position.rope.mode = config::RopeMode::rerope;
                   c.position.rope.rerope.window = 3;
                   c.position.rope.rerope.leak = 4;
                 }});
  out.push_back({"rope+string", PositionKind::rope, [](config::ModelConfig& c) {
                   c.position.rope.mode = config::RopeMode::string;
                   c.position.rope.string.shift_fraction = 0.4;
                   c.position.rope.string.local = 1;
                 }});
  out.push_back({"rope+self_extend", PositionKind::rope, [](config::ModelConfig& c) {
                   c.position.rope.mode = config::RopeMode::self_extend;
                   c.position.rope.self_extend.group = 2;
                   c.position.rope.self_extend.window = 3;
                 }});
  out.push_back({"rope+dual_chunk", PositionKind::rope, [](config::ModelConfig& c) {  // causal only
                   c.position.rope.mode = config::RopeMode::dual_chunk;
                   c.position.rope.dual_chunk.chunk_size = 4;  // chunks of 3 within the 6-10 token inputs
                   c.position.rope.dual_chunk.local_window = 1;
                 }});
  out.push_back({"rope+logn", PositionKind::rope, [](config::ModelConfig& c) {
                   c.attention_scale = config::AttentionScale::logn;
                   c.attention_scale_length = 3;  // inside the inputs: the factor is not 1 everywhere
                 }});
  // The options of 2025: FoX with RoPE and its constant-gate ablation, stick-breaking (causal
  // only) over RoPE and ALiBi, SSMax, QK-norm with an output gate.
  out.push_back({"fox+rope", PositionKind::fox, [](config::ModelConfig& c) { c.position.fox.rope = true; }});
  out.push_back({"fox_bias_only", PositionKind::fox,
                 [](config::ModelConfig& c) { c.position.fox.gate = config::FoxGate::bias_only; }});
  for (PositionKind kind : {PositionKind::rope, PositionKind::alibi, PositionKind::fire})
    out.push_back({name(kind) + "+stick_breaking", kind, [](config::ModelConfig& c) {
                     c.attention_normalizer = config::AttentionNormalizer::stick_breaking;
                   }});
  out.push_back({"none+stick_breaking_discard", PositionKind::none, [](config::ModelConfig& c) {
                   c.attention_normalizer = config::AttentionNormalizer::stick_breaking;
                   c.stick_breaking_remainder = config::StickBreakingRemainder::discard;
                 }});
  out.push_back({"none+llama4_temperature", PositionKind::none, [](config::ModelConfig& c) {
                   c.attention_scale = config::AttentionScale::llama4;
                   c.attention_scale_floor = 2;  // steps inside the inputs
                   c.attention_scale_factor = 0.5;
                 }});
  out.push_back({"none+ssmax", PositionKind::none,
                 [](config::ModelConfig& c) { c.attention_scale = config::AttentionScale::ssmax; }});
  out.push_back({"rope+qk_norm+output_gate", PositionKind::rope, [](config::ModelConfig& c) {
                   c.qk_norm = true;
                   c.output_gate = true;
                 }});
  out.push_back({"rope+head_dim+qk_norm", PositionKind::rope, [](config::ModelConfig& c) {  // Qwen3's attention
                   c.explicit_head_dim = 6;  // 2 heads of 6 on a width of 8: q and o are 12 wide
                   c.qk_norm = true;
                   c.qk_norm_eps = 1e-6;
                   c.output_gate = true;
                 }});
  out.push_back({"rope+parallel_residual", PositionKind::rope, [](config::ModelConfig& c) {  // GPT-NeoX's block
                   c.norm = config::NormPlacement::pre;
                   c.parallel_residual = true;
                   c.position.rope.pairing = config::RopePairing::half;
                   c.position.rope.rotary_dim = 2;  // a half of each 4-wide head rotates
                 }});
  out.push_back({"rope+gemma3_block", PositionKind::rope, [](config::ModelConfig& c) {  // Gemma 3's layer
                   c.norm = config::NormPlacement::sandwich;
                   c.norm_kind = config::NormKind::rms_norm;
                   c.norm_weight_offset = 1.0;
                   c.feed_forward = config::FeedForwardKind::glu;
                   c.activation = config::Activation::gelu_tanh;
                   c.explicit_head_dim = 6;
                   c.score_scale_dim = 5;
                   c.qk_norm = true;
                 }});
  out.push_back({"fox+pro_block", PositionKind::fox, [](config::ModelConfig& c) {  // FoX's Pro block whole
                   c.qk_norm = true;
                   c.output_gate = true;
                   c.output_norm = true;
                   c.kv_shift = true;
                 }});
  // Per-layer layouts: windows shorter than the inputs, a NoPE layer with a temperature that
  // steps inside them, a second RoPE base, QK-norm on some layers only.
  out.push_back({"rope+irope", PositionKind::rope, [](config::ModelConfig& c) {
                   with_layout(c, config::LayoutPreset::irope, 4, 3);
                   c.attention_scale_floor = 2;
                   c.attention_scale_factor = 0.5;
                 }});
  out.push_back({"alibi+rnope_swa", PositionKind::alibi,
                 [](config::ModelConfig& c) { with_layout(c, config::LayoutPreset::rnope_swa, 4, 4); }});
  out.push_back({"fox+sliding_layers", PositionKind::fox, [](config::ModelConfig& c) {  // windows on formed scores
                   c.layout.local.window_kind = config::WindowKind::sliding;
                   c.layout.pattern = "LG";
                   with_layout(c, config::LayoutPreset::custom, 2, 3);
                 }});
  out.push_back({"rope+gemma3", PositionKind::rope,
                 [](config::ModelConfig& c) { with_layout(c, config::LayoutPreset::gemma3, 6, 3); }});
  return out;
}

inline config::ModelConfig tiny(const Case& kase, config::Objective objective) {
  config::ModelConfig c = tiny(kase.kind, objective);
  if (kase.tweak) kase.tweak(c);
  return c;
}

inline EncoderModel build_double(const config::ModelConfig& c, uint64_t seed = 7) {
  EncoderModel m = build_model(c, seed);
  m->to(torch::kFloat64);
  m->eval();
  if (c.position.kind == PositionKind::cope) {  // its zero-initialised tables would hide the term
    torch::NoGradGuard no_grad;
    for (auto& item : m->position->named_parameters()) item.value().normal_(0.0, 0.5);
  }
  return m;
}

}  // namespace model_cases
