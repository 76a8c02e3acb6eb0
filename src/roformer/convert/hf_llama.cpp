// Llama-family config.json and tensor names (see hf_llama.h). The config keys follow
// transformers' LlamaConfig, MistralConfig and Qwen2Config, in both of their spellings: the rope
// settings in `rope_parameters` (transformers 5) or as `rope_theta` and `rope_scaling` (4.x).
#include "roformer/convert/hf_llama.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "roformer/common/errors.h"
#include "roformer/config/layer_layout.h"
#include "roformer/convert/hf_json.h"
#include "roformer/convert/hf_names.h"

namespace roformer::convert {
namespace {

using nlohmann::json;
using namespace hf_json;

struct Family {
  std::string model_type, architecture;
  bool qkv_bias;  // Qwen2's q, k and v projections always have one; Llama's follow attention_bias
  bool qk_norm;   // Qwen3: RMSNorm of each head's q and k (one weight over head_dim) before RoPE
};

const std::vector<Family>& families() {
  static const std::vector<Family> f{{"llama", "LlamaForCausalLM", false, false},
                                     {"mistral", "MistralForCausalLM", false, false},
                                     {"qwen2", "Qwen2ForCausalLM", true, false},
                                     {"qwen3", "Qwen3ForCausalLM", false, true},
                                     {"smollm3", "SmolLM3ForCausalLM", false, false}};
  return f;
}

const Family& family_of(const std::string& model_type) {
  for (const Family& f : families())
    if (f.model_type == model_type) return f;
  throw UserError("model_type '" + model_type + "' is not a Llama-family decoder");
}

std::vector<double> get_doubles(const json& c, const char* key, const std::string& where) {
  if (absent(c, key)) return {};
  if (!c[key].is_array()) throw UserError(where + ": config.json rope '" + key + "' must be a list of numbers");
  std::vector<double> out;
  for (const json& v : c[key]) {
    if (!v.is_number()) throw UserError(where + ": config.json rope '" + key + "' must be a list of numbers");
    out.push_back(v.get<double>());
  }
  return out;
}

// rope_parameters (transformers 5) or rope_scaling (4.x), as one object; an empty one for none.
json rope_settings(const json& hf, const std::string& where) {
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (absent(hf, key)) continue;
    if (!hf[key].is_object()) throw UserError(where + ": config.json '" + key + "' must be an object");
    return hf[key];
  }
  return json::object();
}

}  // namespace

// The rope type's settings onto ours (the same keys transformers' ROPE_INIT_FUNCTIONS read).
void map_hf_rope(const json& hf, const std::string& where, int64_t max_positions, config::RopeConfig& rope) {
  const json r = rope_settings(hf, where);
  rope.pairing = config::RopePairing::half;                               // rotate_half
  const double base = get_double(hf, "rotary_emb_base", where, 10000.0);  // GPT-NeoX's name in transformers 4
  rope.base = get_double(r, "rope_theta", where, get_double(hf, "rope_theta", where, base));
  std::string type = get_string(r, "rope_type", where, get_string(r, "type", where, "default"));
  config::RopeScalingConfig& s = rope.scaling;
  // The context a scaling chosen later (eval --set ...scaling.kind=yarn) extends: the model's own,
  // not data.seq_len (the training default, capped at 2048 for an imported model).
  s.original_max_positions = max_positions;
  if (type == "default") return;
  s.factor = get_double(r, "factor", where, 1.0);
  s.original_max_positions = get_size(r, "original_max_position_embeddings", where, max_positions);
  if (type == "linear") {
    s.kind = config::RopeScalingKind::linear;
  } else if (type == "dynamic") {
    s.kind = config::RopeScalingKind::dynamic_ntk;
    s.original_max_positions = max_positions;  // transformers' dynamic NTK reads max_position_embeddings
  } else if (type == "yarn") {
    s.kind = config::RopeScalingKind::yarn;
    s.beta_fast = get_double(r, "beta_fast", where, 32.0);
    s.beta_slow = get_double(r, "beta_slow", where, 1.0);
    s.attention_factor = get_double(r, "attention_factor", where, 0.0);
    s.mscale = get_double(r, "mscale", where, 0.0);
    s.mscale_all_dim = get_double(r, "mscale_all_dim", where, 0.0);
    s.truncate = get_bool(r, "truncate", where, true);
  } else if (type == "llama3") {
    s.kind = config::RopeScalingKind::llama3;
    s.low_freq_factor = get_double(r, "low_freq_factor", where, 1.0);
    s.high_freq_factor = get_double(r, "high_freq_factor", where, 4.0);
  } else if (type == "longrope") {
    s.kind = config::RopeScalingKind::longrope;
    s.attention_factor = get_double(r, "attention_factor", where, 0.0);
    s.short_factor = get_doubles(r, "short_factor", where);
    s.long_factor = get_doubles(r, "long_factor", where);
  } else {
    throw UserError(where + ": rope type '" + type + "' is not one we implement (default, linear, dynamic, yarn, " +
                    "llama3, longrope)");
  }
}

namespace {

// SmolLM3's NoPE layers (no_rope_layers: 1 = RoPE, 0 = none, per layer) as our layout: local
// layers keep the model's RoPE, global layers have no position; no windows, temperature or
// QK-norm. Every layer alike is no layout (all RoPE) or position kind none (no RoPE anywhere).
void map_nope_layers(const json& hf, const std::string& where, config::ModelConfig& m) {
  if (absent(hf, "no_rope_layers")) return;
  const json& layers = hf["no_rope_layers"];
  if (!layers.is_array() || static_cast<int64_t>(layers.size()) != m.num_layers)
    throw UserError(where + ": config.json 'no_rope_layers' must list 0 or 1 for each of the " +
                    std::to_string(m.num_layers) + " layers");
  std::string pattern;
  for (const json& v : layers) {
    if (!v.is_number_integer() || (v.get<int64_t>() != 0 && v.get<int64_t>() != 1))
      throw UserError(where + ": config.json 'no_rope_layers' entries must be 0 (no RoPE) or 1 (RoPE)");
    pattern += v.get<int64_t>() == 1 ? 'L' : 'G';
  }
  if (pattern.find('G') == std::string::npos) return;
  if (pattern.find('L') == std::string::npos) {
    m.position.kind = config::PositionKind::none;
    return;
  }
  m.layout.preset = config::LayoutPreset::custom;
  m.layout.pattern = pattern;
  for (config::LayerKindConfig* kind : {&m.layout.local, &m.layout.global}) {
    kind->window_kind = config::WindowKind::none;
    kind->temperature = config::LayerTemperature::none;
    kind->qk_norm = config::LayerToggle::off;
  }
  m.layout.local.position = config::LayerPosition::model;
  m.layout.global.position = config::LayerPosition::none;
}

// Which layers attend through a sliding window: L for a sliding_attention layer, G for a
// full_attention one; all G without windows. Mistral (v0.1) windows every layer; Qwen2 and Qwen3
// window the layers config.json's layer_types names (transformers derives them from
// use_sliding_window and max_window_layers: the layers from max_window_layers on).
std::string window_pattern(const json& hf, const Family& family, int64_t layers, const std::string& where) {
  const bool window = !absent(hf, "sliding_window");
  if (family.model_type == "mistral") return std::string(static_cast<size_t>(layers), window ? 'L' : 'G');
  std::string pattern = layer_types_pattern(hf, layers, 0, where);
  if (absent(hf, "layer_types") && window && get_bool(hf, "use_sliding_window", where, false)) {
    const int64_t first = get_size(hf, "max_window_layers", where, 28);
    for (int64_t i = first; i < layers; ++i) pattern[static_cast<size_t>(i)] = 'L';
  }
  if (pattern.find('L') == std::string::npos) return pattern;
  if (family.model_type != "qwen2" && family.model_type != "qwen3")
    throw UserError(where + ": config.json 'layer_types' has sliding_attention layers, which " + family.model_type +
                    " does not have (Mistral windows every layer; Qwen2 and Qwen3 the layers layer_types names)");
  if (!window || !get_bool(hf, "use_sliding_window", where, false))
    throw UserError(where +
                    ": config.json 'layer_types' has sliding_attention layers but use_sliding_window is off "
                    "or sliding_window unset, so transformers gives them no window; set both, or make those "
                    "layers full_attention");
  return pattern;
}

// Llama's names and ours (every family of this file shares them).
const NameTables& llama_names() {
  static const NameTables n{"model.layers.",
                            {{"model.embed_tokens.weight", "embeddings.word_embeddings.weight"},
                             {"model.norm.weight", "encoder.RMSNorm.weight"},
                             {"lm_head.weight", "cls.predictions.decoder.weight"}},
                            {{"self_attn.q_proj.", "attention.self.query."},
                             {"self_attn.k_proj.", "attention.self.key."},
                             {"self_attn.v_proj.", "attention.self.value."},
                             {"self_attn.o_proj.", "attention.output.dense."},
                             {"self_attn.q_norm.", "attention.q_norm."},
                             {"self_attn.k_norm.", "attention.k_norm."},
                             {"input_layernorm.", "attention.output.RMSNorm."},
                             {"post_attention_layernorm.", "output.RMSNorm."},
                             {"mlp.gate_proj.", "intermediate.gate."},
                             {"mlp.up_proj.", "intermediate.dense."},
                             {"mlp.down_proj.", "output.dense."}}};
  return n;
}

}  // namespace

bool is_llama_family(const std::string& model_type) {
  return std::any_of(families().begin(), families().end(), [&](const Family& f) { return f.model_type == model_type; });
}

bool is_llama_architecture(const std::string& architecture) {
  return std::any_of(families().begin(), families().end(),
                     [&](const Family& f) { return f.architecture == architecture; });
}

void parse_llama_config(const json& hf, const std::string& where, HfConfig& out) {
  const Family& family = family_of(get_string(hf, "model_type", where, ""));
  out.architecture = family.architecture;
  check_architectures(hf, family.architecture, family.model_type, where);
  config::ModelConfig& m = out.config.model;
  m.objective = config::Objective::causal_lm;
  m.vocab_size = get_size(hf, "vocab_size", where);
  m.hidden_size = get_size(hf, "hidden_size", where);
  m.num_layers = get_size(hf, "num_hidden_layers", where);
  m.num_heads = get_size(hf, "num_attention_heads", where);
  m.num_kv_heads = get_size(hf, "num_key_value_heads", where, m.num_heads);
  m.ffn_size = get_size(hf, "intermediate_size", where);
  // transformers' default when config.json has no head_dim (Qwen3's class default is 128, but its
  // saved configs carry the key).
  const int64_t head_dim = get_size(hf, "head_dim", where, m.hidden_size / m.num_heads);
  if (head_dim * m.num_heads != m.hidden_size) m.explicit_head_dim = head_dim;
  m.activation = activation_from_hf(get_string(hf, "hidden_act", where, "silu"), where);
  m.feed_forward = config::FeedForwardKind::glu;
  m.norm = config::NormPlacement::pre;
  m.norm_kind = config::NormKind::rms_norm;
  m.layer_norm_eps = get_double(hf, "rms_norm_eps", where, 1e-6);
  m.qk_norm = family.qk_norm;
  m.qk_norm_eps = m.layer_norm_eps;  // Qwen3RMSNorm(head_dim, eps=rms_norm_eps)
  m.hidden_dropout = 0.0;
  m.attention_dropout = get_double(hf, "attention_dropout", where, 0.0);
  m.init_std = get_double(hf, "initializer_range", where, 0.02);
  m.type_vocab_size = 0;
  m.embedding_norm = false;
  m.lm_head = config::LmHeadKind::linear;
  m.tie_output = get_bool(hf, "tie_word_embeddings", where, false);
  const bool attention_bias = get_bool(hf, "attention_bias", where, false);
  m.qkv_bias = family.qkv_bias || attention_bias;
  m.output_bias = attention_bias;
  m.ffn_bias = get_bool(hf, "mlp_bias", where, false);
  const std::string windows = window_pattern(hf, family, m.num_layers, where);
  out.max_positions = get_size(hf, "max_position_embeddings", where, 2048);
  m.position.kind = config::PositionKind::rope;
  map_hf_rope(hf, where, out.max_positions, m.position.rope);
  map_nope_layers(hf, where, m);
  if (windows.find('L') != std::string::npos) {  // L: a sliding window of W at the model's RoPE; G: every key
    if (config::has_layout(m)) throw UserError(where + ": sliding_window with no_rope_layers is not supported");
    m.layout.preset = config::LayoutPreset::custom;
    m.layout.pattern = windows.find('G') == std::string::npos ? "L" : windows;
    m.layout.local = {config::LayerPosition::model,          config::WindowKind::sliding,
                      get_size(hf, "sliding_window", where), 0.0,
                      config::LayerTemperature::none,        config::LayerToggle::off};
    m.layout.global = {config::LayerPosition::model,   config::WindowKind::none, 0, 0.0,
                       config::LayerTemperature::none, config::LayerToggle::off};
    if (m.qk_norm) m.layout.local.qk_norm = m.layout.global.qk_norm = config::LayerToggle::on;  // Qwen3's, everywhere
  }
  out.config.data.seq_len = std::min<int64_t>(out.max_positions, 2048);
}

std::string llama_parameter_name(const std::string& hf_name, bool tied_output) {
  if (hf_name == "lm_head.weight" && tied_output) return "";
  if (hf_name.find("rotary_emb.") != std::string::npos) return "";  // a cache of inv_freq (older checkpoints)
  return ours_from_hf(llama_names(), hf_name);
}

bool is_qk_norm_weight(const std::string& ours) {
  for (const char* end : {".attention.q_norm.weight", ".attention.k_norm.weight"})
    if (ours.size() > std::strlen(end) && ours.compare(ours.size() - std::strlen(end), std::string::npos, end) == 0)
      return true;
  return false;
}

std::string llama_hf_name(const std::string& ours) {
  return hf_from_ours(llama_names(), ours);
}

}  // namespace roformer::convert
