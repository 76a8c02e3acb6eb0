// config.json mapping (see hf_config.h): RoFormer's, with its fixed choices (RoPE, interleaved
// pairs, base 10000, whole head, post-LN); a Llama-family config goes to hf_llama.cpp, GPT-NeoX's
// to hf_neox.cpp.
#include "roformer/convert/hf_config.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "roformer/common/errors.h"
#include "roformer/common/strings.h"
#include "roformer/config/config_loader.h"
#include "roformer/convert/hf_cohere2.h"
#include "roformer/convert/hf_gemma3.h"
#include "roformer/convert/hf_json.h"
#include "roformer/convert/hf_llama.h"
#include "roformer/convert/hf_neox.h"

namespace roformer::convert {
namespace {

using nlohmann::json;
using namespace hf_json;

const std::vector<std::string>& supported_architectures() {
  static const std::vector<std::string> a{"RoFormerForMaskedLM", "RoFormerForCausalLM", "RoFormerModel"};
  return a;
}

// The architecture and the checks that the source is stock RoFormer.
std::string check_source(const json& hf, const std::string& where) {
  const std::string model_type = get_string(hf, "model_type", where, "");
  if (model_type != "roformer")
    throw UserError(where + ": model_type is '" + model_type +
                    "', not 'roformer'; RoFormer, the Llama family (llama, mistral, qwen2, qwen3, smollm3), "
                    "gemma3_text, gpt_neox and cohere2 convert");
  std::string arch = "RoFormerModel";
  if (!absent(hf, "architectures")) {
    const json& a = hf["architectures"];
    if (!a.is_array() || (!a.empty() && !a[0].is_string()))
      throw UserError(where + ": config.json 'architectures' must be a list of class names");
    if (!a.empty()) arch = a[0].get<std::string>();
  }
  const auto& supported = supported_architectures();
  if (std::find(supported.begin(), supported.end(), arch) == supported.end())
    throw UserError(where + ": architecture '" + arch +
                    "' is not supported (RoFormerForMaskedLM, RoFormerForCausalLM, RoFormerModel are)");
  if (!absent(hf, "rope_scaling") || hf.contains("rope_theta"))
    throw UserError(where +
                    ": config.json has rope_theta/rope_scaling, which stock RoFormer ignores; "
                    "this checkpoint comes from a fork whose behaviour we cannot match");
  return arch;
}

// Names the config ("hf-<name>"); what we write must load again: the mapped config goes through
// our own loader's range and cross-field checks (a negative layer_norm_eps, a dropout above 1, ...)
// before any tensor.
HfConfig checked(HfConfig out, const std::string& where, const std::string& name) {
  out.config.name = "hf-" + (name.empty() ? std::string("model") : name);
  config::LoadedConfig check;
  config::apply_yaml_text(check, config::dump_yaml(out.config), where + " (config.json as our config)");
  config::validate(check.config, check.origins);
  return out;
}

}  // namespace

HfConfig parse_hf_config(const std::string& json_text, const std::string& where, const std::string& name) {
  json hf;
  try {
    hf = json::parse(json_text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for numbers like 9e999
    throw UserError(where + ": config.json is not valid JSON: " + e.what());
  }
  if (!hf.is_object()) throw UserError(where + ": config.json must be a JSON object");
  HfConfig out;
  if (is_llama_family(get_string(hf, "model_type", where, ""))) {
    parse_llama_config(hf, where, out);
    return checked(std::move(out), where, name);
  }
  if (is_gemma3_family(get_string(hf, "model_type", where, ""))) {
    parse_gemma3_config(hf, where, out);
    return checked(std::move(out), where, name);
  }
  if (is_cohere2_family(get_string(hf, "model_type", where, ""))) {
    parse_cohere2_config(hf, where, out);
    return checked(std::move(out), where, name);
  }
  if (is_neox_family(get_string(hf, "model_type", where, ""))) {
    parse_neox_config(hf, where, out);
    return checked(std::move(out), where, name);
  }
  out.architecture = check_source(hf, where);
  config::Config& cfg = out.config;
  config::ModelConfig& m = cfg.model;
  const bool decoder = get_bool(hf, "is_decoder", where, false);
  m.objective =
      out.architecture == "RoFormerForCausalLM" || decoder ? config::Objective::causal_lm : config::Objective::mlm;
  m.vocab_size = get_size(hf, "vocab_size", where);
  m.hidden_size = get_size(hf, "hidden_size", where);
  m.embedding_size = get_size(hf, "embedding_size", where, m.hidden_size);
  if (m.embedding_size == m.hidden_size) m.embedding_size = 0;
  m.num_layers = get_size(hf, "num_hidden_layers", where);
  m.num_heads = get_size(hf, "num_attention_heads", where);
  m.ffn_size = get_size(hf, "intermediate_size", where);
  m.activation = activation_from_hf(get_string(hf, "hidden_act", where, "gelu"), where);
  m.hidden_dropout = get_double(hf, "hidden_dropout_prob", where, 0.1);
  m.attention_dropout = get_double(hf, "attention_probs_dropout_prob", where, 0.1);
  m.layer_norm_eps = get_double(hf, "layer_norm_eps", where, 1e-12);
  m.type_vocab_size = get_size(hf, "type_vocab_size", where, 2, 0);
  m.init_std = get_double(hf, "initializer_range", where, 0.02);
  m.norm = config::NormPlacement::post;
  m.position.kind = config::PositionKind::rope;
  m.position.rope.pairing = config::RopePairing::interleaved;
  m.position.rope.base = 10000.0;
  m.position.rope.rotary_dim = 0;
  m.position.rope.rotate_value = get_bool(hf, "rotary_value", where, false);
  if (m.hidden_size % m.num_heads != 0 || m.head_dim() % 2 != 0)
    throw UserError(where + ": hidden_size " + std::to_string(m.hidden_size) + " / num_attention_heads " +
                    std::to_string(m.num_heads) + " must give an even head dimension");
  out.max_positions = get_size(hf, "max_position_embeddings", where, 1536);
  cfg.data.seq_len = std::min<int64_t>(out.max_positions, 512);
  return checked(std::move(out), where, name);
}

}  // namespace roformer::convert
