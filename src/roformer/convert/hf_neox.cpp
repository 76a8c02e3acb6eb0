// GPT-NeoX config.json and tensor names (see hf_neox.h). The keys follow transformers'
// GPTNeoXConfig in both of its spellings: rope_parameters {rope_theta, partial_rotary_factor}
// (transformers 5) or rotary_emb_base and rotary_pct (4.x, Pythia's released configs).
#include "roformer/convert/hf_neox.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "roformer/common/errors.h"
#include "roformer/convert/hf_llama.h"
#include "roformer/convert/hf_names.h"

namespace roformer::convert {
namespace {

using nlohmann::json;
using namespace hf_json;

// GPT-NeoX's names and ours (query_key_value apart: it is split, below).
const NameTables& neox_names() {
  static const NameTables n{"gpt_neox.layers.",
                            {{"gpt_neox.embed_in.weight", "embeddings.word_embeddings.weight"},
                             {"gpt_neox.final_layer_norm.weight", "encoder.LayerNorm.weight"},
                             {"gpt_neox.final_layer_norm.bias", "encoder.LayerNorm.bias"},
                             {"embed_out.weight", "cls.predictions.decoder.weight"}},
                            {{"attention.dense.", "attention.output.dense."},
                             {"input_layernorm.", "attention.output.LayerNorm."},
                             {"post_attention_layernorm.", "output.LayerNorm."},
                             {"mlp.dense_h_to_4h.", "intermediate.dense."},
                             {"mlp.dense_4h_to_h.", "output.dense."}}};
  return n;
}

const char* const kNeoxSelf = "attention.self.";
const char* const kNeoxQkv = "attention.query_key_value.";

}  // namespace

bool is_neox_family(const std::string& model_type) {
  return model_type == "gpt_neox";
}

void parse_neox_config(const json& hf, const std::string& where, HfConfig& out) {
  out.architecture = kNeoxArchitecture;
  check_architectures(hf, kNeoxArchitecture, "gpt_neox", where);
  config::ModelConfig& m = out.config.model;
  m.objective = config::Objective::causal_lm;
  m.vocab_size = get_size(hf, "vocab_size", where);
  m.hidden_size = get_size(hf, "hidden_size", where);
  m.num_layers = get_size(hf, "num_hidden_layers", where);
  m.num_heads = get_size(hf, "num_attention_heads", where);
  m.ffn_size = get_size(hf, "intermediate_size", where);
  if (m.hidden_size % m.num_heads != 0)
    throw UserError(where + ": hidden_size " + std::to_string(m.hidden_size) + " is not divisible by " +
                    std::to_string(m.num_heads) + " num_attention_heads (GPT-NeoX's heads split the width)");
  m.activation = activation_from_hf(get_string(hf, "hidden_act", where, "gelu"), where);
  m.feed_forward = config::FeedForwardKind::mlp;
  m.norm = config::NormPlacement::pre;
  m.norm_kind = config::NormKind::layer_norm;
  m.parallel_residual = get_bool(hf, "use_parallel_residual", where, true);
  m.layer_norm_eps = get_double(hf, "layer_norm_eps", where, 1e-5);
  m.hidden_dropout = get_double(hf, "hidden_dropout", where, 0.0);
  m.attention_dropout = get_double(hf, "attention_dropout", where, 0.0);
  m.init_std = get_double(hf, "initializer_range", where, 0.02);
  m.type_vocab_size = 0;
  m.embedding_norm = false;
  m.lm_head = config::LmHeadKind::linear;
  m.tie_output = get_bool(hf, "tie_word_embeddings", where, false);
  const bool bias = get_bool(hf, "attention_bias", where, true);
  m.qkv_bias = m.output_bias = bias;
  m.ffn_bias = true;  // GPTNeoXMLP's two Linears always have one
  out.max_positions = get_size(hf, "max_position_embeddings", where, 2048);
  m.position.kind = config::PositionKind::rope;
  map_hf_rope(hf, where, out.max_positions, m.position.rope);
  double fraction = get_double(hf, "rotary_pct", where, 1.0);
  if (!absent(hf, "rope_parameters") && hf["rope_parameters"].is_object())
    fraction = get_double(hf["rope_parameters"], "partial_rotary_factor", where, fraction);
  const int64_t head_dim = m.hidden_size / m.num_heads;
  const auto rotary = static_cast<int64_t>(static_cast<double>(head_dim) * fraction);  // int(), as transformers
  if (!(fraction > 0.0 && fraction <= 1.0) || rotary % 2 != 0 || rotary == 0)
    throw UserError(where + ": the rotary fraction " + std::to_string(fraction) + " of head_dim " +
                    std::to_string(head_dim) + " gives " + std::to_string(rotary) +
                    " rotated features; RoPE needs an even count above 0");
  m.position.rope.rotary_dim = rotary == head_dim ? 0 : rotary;
  out.config.data.seq_len = std::min<int64_t>(out.max_positions, 2048);
}

std::string neox_parameter_name(const std::string& hf_name, bool tied_output) {
  if (hf_name == "embed_out.weight" && tied_output) return "";
  if (hf_name.find("rotary_emb.") != std::string::npos) return "";  // inv_freq caches
  std::string index, rest;
  if (split_numbered(hf_name, neox_names().layers_prefix, index, rest)) {
    if (rest == "attention.bias" || rest == "attention.masked_bias") return "";      // old causal-mask buffers
    if (rest.rfind(kNeoxQkv, 0) == 0) return "encoder.layer." + index + "." + rest;  // fused: split by the caller
  }
  return ours_from_hf(neox_names(), hf_name);
}

std::string neox_fused_qkv_part(const std::string& fused, int part) {
  const size_t at = fused.find(kNeoxQkv);
  if (at == std::string::npos) return "";
  static const char* const parts[] = {"query.", "key.", "value."};
  return fused.substr(0, at) + kNeoxSelf + parts[part] + fused.substr(at + std::string(kNeoxQkv).size());
}

int neox_split_part(const std::string& ours) {
  std::string index, rest;
  if (!split_numbered(ours, "encoder.layer.", index, rest) || rest.rfind(kNeoxSelf, 0) != 0) return -1;
  const std::string part = rest.substr(std::string(kNeoxSelf).size());
  if (part.rfind("query.", 0) == 0) return 0;
  if (part.rfind("key.", 0) == 0) return 1;
  if (part.rfind("value.", 0) == 0) return 2;
  return -1;
}

std::string neox_hf_name(const std::string& ours) {
  std::string index, rest;
  if (neox_split_part(ours) >= 0 && split_numbered(ours, "encoder.layer.", index, rest))  // q, k, v: the fused one
    return neox_names().layers_prefix + index + "." + kNeoxQkv + rest.substr(rest.rfind('.') + 1);
  return hf_from_ours(neox_names(), ours);
}

}  // namespace roformer::convert
