// Gemma 3 text config.json and tensor names (see hf_gemma3.h). The RoPE keys follow transformers
// 5's rope_parameters per layer type ({"full_attention": ..., "sliding_attention": ...}) or 4.x's
// rope_theta, rope_scaling and rope_local_base_freq; a scaling applies to the global layers alone.
#include "roformer/convert/hf_gemma3.h"

#include <algorithm>
#include <vector>

#include "roformer/common/errors.h"
#include "roformer/convert/hf_llama.h"
#include "roformer/convert/hf_names.h"

namespace roformer::convert {
namespace {

using nlohmann::json;
using namespace hf_json;

// Gemma 3's names and ours: four norms per layer, two of them on the sublayers' outputs.
const NameTables& gemma3_names() {
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
                             {"post_attention_layernorm.", "attention.output.post_RMSNorm."},
                             {"pre_feedforward_layernorm.", "output.RMSNorm."},
                             {"post_feedforward_layernorm.", "output.post_RMSNorm."},
                             {"mlp.gate_proj.", "intermediate.gate."},
                             {"mlp.up_proj.", "intermediate.dense."},
                             {"mlp.down_proj.", "output.dense."}}};
  return n;
}

// The sliding layers' RoPE base; refused if they scale (Gemma 3 scales its global layers only).
double sliding_theta(const json& hf, const std::string& where) {
  const char* type = "sliding_attention";
  if (!absent(hf, "rope_parameters")) {
    const json& p = hf["rope_parameters"];
    if (!p.is_object()) throw UserError(where + ": config.json 'rope_parameters' must be an object");
    if (!absent(p, type)) {
      const json& t = p[type];
      if (!t.is_object()) throw UserError(where + ": config.json rope_parameters '" + type + "' must be an object");
      const std::string kind = get_string(t, "rope_type", where, "default");
      if (kind != "default")
        throw UserError(where + ": rope_parameters 'sliding_attention' has rope_type '" + kind +
                        "'; Gemma 3 scales its global layers only, and a scaling of the sliding layers is not "
                        "supported");
      return get_double(t, "rope_theta", where, 1e4);
    }
  }
  return get_double(hf, "rope_local_base_freq", where, 1e4);
}

// The global layers' RoPE, any rope type the Llama family reads: rope_parameters' full_attention
// (transformers 5), or 4.x's rope_theta with rope_scaling (which Gemma 3 applies to them alone).
void global_rope(const json& hf, const std::string& where, int64_t max_positions, config::RopeConfig& rope) {
  json source = {{"rope_theta", get_double(hf, "rope_theta", where, 1e6)}};
  if (!absent(hf, "rope_parameters")) {
    const json& p = hf["rope_parameters"];
    if (!p.is_object()) throw UserError(where + ": config.json 'rope_parameters' must be an object");
    if (!absent(p, "full_attention")) source["rope_parameters"] = p["full_attention"];
  } else if (!absent(hf, "rope_scaling")) {
    source["rope_scaling"] = hf["rope_scaling"];
  }
  map_hf_rope(source, where, max_positions, rope);
}

}  // namespace

bool is_gemma3_family(const std::string& model_type) {
  return model_type == "gemma3_text";
}

void parse_gemma3_config(const json& hf, const std::string& where, HfConfig& out) {
  out.architecture = kGemma3Architecture;
  check_architectures(hf, kGemma3Architecture, "gemma3_text", where);
  for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"})
    if (!absent(hf, key))
      throw UserError(where + ": config.json sets " + key + "; logit soft-capping is not supported");
  if (get_bool(hf, "use_bidirectional_attention", where, false))
    throw UserError(where + ": use_bidirectional_attention is true; only the causal Gemma 3 converts");
  config::ModelConfig& m = out.config.model;
  m.objective = config::Objective::causal_lm;
  m.vocab_size = get_size(hf, "vocab_size", where);
  m.hidden_size = get_size(hf, "hidden_size", where);
  m.num_layers = get_size(hf, "num_hidden_layers", where);
  m.num_heads = get_size(hf, "num_attention_heads", where);
  m.num_kv_heads = get_size(hf, "num_key_value_heads", where, m.num_heads);
  m.ffn_size = get_size(hf, "intermediate_size", where);
  const int64_t head_dim = get_size(hf, "head_dim", where, 256);
  if (head_dim * m.num_heads != m.hidden_size) m.explicit_head_dim = head_dim;
  const int64_t scalar = get_size(hf, "query_pre_attn_scalar", where, 256);
  m.score_scale_dim = scalar == head_dim ? 0 : scalar;
  m.activation = activation_from_hf(get_string(hf, "hidden_activation", where, "gelu_pytorch_tanh"), where);
  m.feed_forward = config::FeedForwardKind::glu;
  m.norm = config::NormPlacement::sandwich;
  m.norm_kind = config::NormKind::rms_norm;
  m.norm_weight_offset = 1.0;  // Gemma3RMSNorm: x / rms(x) * (1 + weight)
  m.layer_norm_eps = get_double(hf, "rms_norm_eps", where, 1e-6);
  m.qk_norm = true;
  m.qk_norm_eps = m.layer_norm_eps;
  m.embed_scale = config::EmbedScale::sqrt_d;  // Gemma3TextScaledWordEmbedding: x sqrt(hidden_size)
  m.hidden_dropout = 0.0;
  m.attention_dropout = get_double(hf, "attention_dropout", where, 0.0);
  m.init_std = get_double(hf, "initializer_range", where, 0.02);
  m.type_vocab_size = 0;
  m.embedding_norm = false;
  m.lm_head = config::LmHeadKind::linear;
  m.tie_output = get_bool(hf, "tie_word_embeddings", where, true);
  m.qkv_bias = m.output_bias = get_bool(hf, "attention_bias", where, false);
  m.ffn_bias = false;
  out.max_positions = get_size(hf, "max_position_embeddings", where, 131072);
  m.position.kind = config::PositionKind::rope;
  global_rope(hf, where, out.max_positions, m.position.rope);
  const double local_base = sliding_theta(hf, where);
  const std::string pattern =
      layer_types_pattern(hf, m.num_layers, get_size(hf, "sliding_window_pattern", where, 6), where);
  if (pattern.find('L') != std::string::npos) {
    m.layout.preset = config::LayoutPreset::custom;
    m.layout.pattern = pattern;
    m.layout.local = {config::LayerPosition::model,
                      config::WindowKind::sliding,
                      get_size(hf, "sliding_window", where, 4096),
                      local_base,
                      config::LayerTemperature::none,
                      config::LayerToggle::on,
                      config::LayerToggle::off};  // the sliding layers never take the global layers' scaling
    m.layout.global = {config::LayerPosition::model, config::WindowKind::none,       0,
                       m.position.rope.base,         config::LayerTemperature::none, config::LayerToggle::on,
                       config::LayerToggle::on};
  }
  out.config.data.seq_len = std::min<int64_t>(out.max_positions, 2048);
}

std::string gemma3_parameter_name(const std::string& hf_name, bool tied_output) {
  if (hf_name == "lm_head.weight" && tied_output) return "";
  return ours_from_hf(gemma3_names(), hf_name);
}

std::string gemma3_hf_name(const std::string& ours) {
  return hf_from_ours(gemma3_names(), ours);
}

}  // namespace roformer::convert
