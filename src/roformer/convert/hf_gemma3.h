// Gemma 3's text decoder from Hugging Face (Gemma3ForCausalLM, model_type gemma3_text), torch-free:
// its config.json as our config (RMSNorm before and after each sublayer with the scale 1 + weight,
// GeGLU, grouped-query attention with its own head width, QK-norm, scores over
// sqrt(query_pre_attn_scalar), embeddings times sqrt(hidden_size), a tied head, and its
// sliding-window and global layers as our per-layer layout with their two RoPE bases) and its
// tensor names as ours, both ways.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "roformer/convert/hf_json.h"

namespace roformer::convert {

inline constexpr const char* kGemma3Architecture = "Gemma3ForCausalLM";

// True for model_type gemma3_text.
bool is_gemma3_family(const std::string& model_type);

// Maps a Gemma 3 text config.json into `out`; a key we cannot honour (logit soft-capping,
// bidirectional attention, a rope scaling on the global layers) is a UserError naming it.
void parse_gemma3_config(const nlohmann::json& hf, const std::string& where, HfConfig& out);

// Our parameter name for a Gemma 3 tensor ("" for lm_head.weight when tied; the name unchanged for
// one we do not know), and the way back ("" for a parameter Gemma 3 does not have).
std::string gemma3_parameter_name(const std::string& hf_name, bool tied_output);
std::string gemma3_hf_name(const std::string& ours);

}  // namespace roformer::convert
