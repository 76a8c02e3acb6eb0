// Typed reads of a Hugging Face config.json: each names the key and the fix when the value is
// missing or of the wrong type, and sizes have a lower bound (a zero head count would divide by
// zero); hidden_act's names both ways; and HfConfig, what a mapping of one yields. Header-only and torch-free (the
// config fuzz target runs them).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "roformer/common/errors.h"
#include "roformer/config/config.h"

namespace roformer::convert {

// What a config.json mapping yields: our config, the source's class and its context length.
struct HfConfig {
  config::Config config;     // model keys mapped; data.seq_len = min(max_position_embeddings, 512 or 2048)
  std::string architecture;  // RoFormerFor{MaskedLM,CausalLM}, RoFormerModel, or a Llama family's (hf_llama.h)
  int64_t max_positions = 0;
  double logit_scale = 1.0;  // Cohere 2: a factor on the logits, folded into the final norm's weight
};

namespace hf_json {

using nlohmann::json;

inline bool absent(const json& c, const char* key) {
  return !c.contains(key) || c[key].is_null();
}

inline int64_t get_int(const json& c, const char* key, const std::string& where, std::optional<int64_t> fallback = {}) {
  if (absent(c, key)) {
    if (fallback) return *fallback;
    throw UserError(where + ": config.json has no '" + key + "'");
  }
  if (!c[key].is_number_integer()) throw UserError(where + ": config.json '" + key + "' must be an integer");
  if (c[key].is_number_unsigned() && c[key].get<uint64_t>() > uint64_t{INT64_MAX})
    throw UserError(where + ": config.json '" + key + "' is too large");
  return c[key].get<int64_t>();
}

// A size from config.json that must be at least `lo` (a zero head count divided by zero).
inline int64_t get_size(const json& c, const char* key, const std::string& where, std::optional<int64_t> fallback = {},
                        int64_t lo = 1) {
  const int64_t v = get_int(c, key, where, fallback);
  if (v < lo)
    throw UserError(where + ": config.json '" + key + "' is " + std::to_string(v) + "; it must be at least " +
                    std::to_string(lo));
  return v;
}

inline double get_double(const json& c, const char* key, const std::string& where, double fallback) {
  if (absent(c, key)) return fallback;
  if (!c[key].is_number()) throw UserError(where + ": config.json '" + key + "' must be a number");
  return c[key].get<double>();
}

inline std::string get_string(const json& c, const char* key, const std::string& where, const std::string& fallback) {
  if (absent(c, key)) return fallback;
  if (!c[key].is_string()) throw UserError(where + ": config.json '" + key + "' must be a string");
  return c[key].get<std::string>();
}

inline bool get_bool(const json& c, const char* key, const std::string& where, bool fallback) {
  if (absent(c, key)) return fallback;
  if (!c[key].is_boolean()) throw UserError(where + ": config.json '" + key + "' must be true or false");
  return c[key].get<bool>();
}

// hidden_act's names, both ways (one activation, one way to spell it in config.json).
inline config::Activation activation_from_hf(const std::string& act, const std::string& where) {
  if (act == "gelu") return config::Activation::gelu;
  if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast") return config::Activation::gelu_tanh;
  if (act == "relu") return config::Activation::relu;
  if (act == "silu" || act == "swish") return config::Activation::silu;
  throw UserError(where + ": hidden_act '" + act +
                  "' is not supported (gelu, gelu_new, gelu_pytorch_tanh, relu, silu, swish are)");
}

inline std::string activation_to_hf(config::Activation a) {
  switch (a) {
    case config::Activation::gelu:
      return "gelu";
    case config::Activation::gelu_tanh:
      return "gelu_pytorch_tanh";
    case config::Activation::relu:
      return "relu";
    case config::Activation::silu:
      return "silu";
  }
  return "gelu";
}

// `layer_types` as our layout's pattern: L for sliding_attention, G for full_attention; without
// the key, transformers' default of every `every`-th layer global (Gemma 3: 6, Cohere 2: 4), or
// all G when `every` is 0.
inline std::string layer_types_pattern(const json& hf, int64_t layers, int64_t every, const std::string& where) {
  std::string pattern;
  if (absent(hf, "layer_types")) {
    for (int64_t i = 0; i < layers; ++i) pattern += every > 0 && (i + 1) % every != 0 ? 'L' : 'G';
    return pattern;
  }
  const json& types = hf["layer_types"];
  if (!types.is_array() || static_cast<int64_t>(types.size()) != layers)
    throw UserError(where + ": config.json 'layer_types' must name each of the " + std::to_string(layers) + " layers");
  for (const json& t : types) {
    const std::string s = t.is_string() ? t.get<std::string>() : "";
    if (s != "sliding_attention" && s != "full_attention")
      throw UserError(where + ": config.json 'layer_types' entries must be sliding_attention or full_attention");
    pattern += s == "sliding_attention" ? 'L' : 'G';
  }
  return pattern;
}

// config.json's `architectures`, where present, must be exactly [arch] for `model_type`.
inline void check_architectures(const json& hf, const std::string& arch, const std::string& model_type,
                                const std::string& where) {
  if (absent(hf, "architectures")) return;
  const json& a = hf["architectures"];
  if (!a.is_array() || a.size() != 1 || !a[0].is_string() || a[0].get<std::string>() != arch)
    throw UserError(where + ": 'architectures' must be [\"" + arch + "\"] for model_type '" + model_type +
                    "' (a base model without its LM head is not supported)");
}

}  // namespace hf_json
}  // namespace roformer::convert
