// Cohere 2 config.json and tensor names (see hf_cohere2.h), after transformers' Cohere2Config:
// layer_types (or sliding_window_pattern: every fourth layer global), rope_parameters or
// rope_theta, logit_scale.
#include "roformer/convert/hf_cohere2.h"

#include <algorithm>

#include "roformer/common/errors.h"
#include "roformer/convert/hf_llama.h"
#include "roformer/convert/hf_names.h"

namespace roformer::convert {
namespace {

using nlohmann::json;
using namespace hf_json;

const NameTables& cohere2_names() {
  static const NameTables n{"model.layers.",
                            {{"model.embed_tokens.weight", "embeddings.word_embeddings.weight"},
                             {"model.norm.weight", "encoder.LayerNorm.weight"},
                             {"lm_head.weight", "cls.predictions.decoder.weight"}},
                            {{"self_attn.q_proj.", "attention.self.query."},
                             {"self_attn.k_proj.", "attention.self.key."},
                             {"self_attn.v_proj.", "attention.self.value."},
                             {"self_attn.o_proj.", "attention.output.dense."},
                             {"input_layernorm.", "attention.output.LayerNorm."},
                             {"mlp.gate_proj.", "intermediate.gate."},
                             {"mlp.up_proj.", "intermediate.dense."},
                             {"mlp.down_proj.", "output.dense."}}};
  return n;
}

}  // namespace

bool is_cohere2_family(const std::string& model_type) {
  return model_type == "cohere2";
}

void parse_cohere2_config(const json& hf, const std::string& where, HfConfig& out) {
  out.architecture = kCohere2Architecture;
  check_architectures(hf, kCohere2Architecture, "cohere2", where);
  if (get_bool(hf, "use_qk_norm", where, false)) throw UserError(where + ": use_qk_norm is not supported for Cohere 2");
  config::ModelConfig& m = out.config.model;
  m.objective = config::Objective::causal_lm;
  m.vocab_size = get_size(hf, "vocab_size", where);
  m.hidden_size = get_size(hf, "hidden_size", where);
  m.num_layers = get_size(hf, "num_hidden_layers", where);
  m.num_heads = get_size(hf, "num_attention_heads", where);
  m.num_kv_heads = get_size(hf, "num_key_value_heads", where, m.num_heads);
  m.ffn_size = get_size(hf, "intermediate_size", where);
  if (m.hidden_size % m.num_heads != 0)
    throw UserError(where + ": hidden_size " + std::to_string(m.hidden_size) + " is not divisible by " +
                    std::to_string(m.num_heads) + " num_attention_heads");
  m.activation = activation_from_hf(get_string(hf, "hidden_act", where, "silu"), where);
  m.feed_forward = config::FeedForwardKind::glu;
  m.norm = config::NormPlacement::pre;
  m.norm_kind = config::NormKind::layer_norm;
  m.parallel_residual = true;
  m.layer_norm_eps = get_double(hf, "layer_norm_eps", where, 1e-5);
  m.hidden_dropout = 0.0;
  m.attention_dropout = get_double(hf, "attention_dropout", where, 0.0);
  m.init_std = get_double(hf, "initializer_range", where, 0.02);
  m.type_vocab_size = 0;
  m.embedding_norm = false;
  m.lm_head = config::LmHeadKind::linear;
  m.tie_output = get_bool(hf, "tie_word_embeddings", where, true);
  m.qkv_bias = m.output_bias = get_bool(hf, "attention_bias", where, false);
  m.ffn_bias = false;
  out.logit_scale = get_double(hf, "logit_scale", where, 0.0625);
  if (!(out.logit_scale > 0.0))
    throw UserError(where + ": logit_scale " + std::to_string(out.logit_scale) +
                    " is not positive; the import folds it into the final norm's weight");
  out.max_positions = get_size(hf, "max_position_embeddings", where, 8192);
  m.position.kind = config::PositionKind::rope;
  map_hf_rope(hf, where, out.max_positions, m.position.rope);
  m.position.rope.pairing = config::RopePairing::interleaved;  // Cohere's rotate_half pairs neighbours
  const std::string pattern =
      layer_types_pattern(hf, m.num_layers, get_size(hf, "sliding_window_pattern", where, 4), where);
  if (pattern.find('L') == std::string::npos) {
    m.position.kind = config::PositionKind::none;  // every layer global: no position encoding anywhere
  } else {
    m.layout.preset = config::LayoutPreset::custom;
    m.layout.pattern = pattern.find('G') == std::string::npos ? "L" : pattern;
    m.layout.local = {
        config::LayerPosition::model,   config::WindowKind::sliding, get_size(hf, "sliding_window", where, 4096), 0.0,
        config::LayerTemperature::none, config::LayerToggle::off};
    m.layout.global = {config::LayerPosition::none,    config::WindowKind::none, 0, 0.0,
                       config::LayerTemperature::none, config::LayerToggle::off};
  }
  out.config.data.seq_len = std::min<int64_t>(out.max_positions, 2048);
}

std::vector<std::string> cohere2_parameter_names(const std::string& hf_name, bool tied_output) {
  if (hf_name == "lm_head.weight" && tied_output) return {};
  if (hf_name.find("rotary_emb.") != std::string::npos) return {};
  const std::string ours = ours_from_hf(cohere2_names(), hf_name);
  const std::string norm = "attention.output.LayerNorm.";
  const size_t at = ours.find(norm);
  if (at == std::string::npos) return {ours};
  return {ours, ours.substr(0, at) + "output.LayerNorm." + ours.substr(at + norm.size())};
}

std::string cohere2_hf_name(const std::string& ours) {
  if (ours.size() >= 5 && ours.compare(ours.size() - 5, 5, ".bias") == 0 && ours.find("LayerNorm") != std::string::npos)
    return "";
  return hf_from_ours(cohere2_names(), ours);
}

}  // namespace roformer::convert
