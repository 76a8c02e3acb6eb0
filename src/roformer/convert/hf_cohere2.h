// Cohere 2 decoders from Hugging Face (Cohere2ForCausalLM: Command R7B, Command A), torch-free:
// their config.json as our config and their tensor names as ours. Cohere 2's layer normalises its
// input once (a LayerNorm without bias) and adds attention and the SwiGLU feed-forward side by side
// (our parallel_residual, whose two norms get the same weight and zero biases); its sliding-window
// layers rotate interleaved pairs and its global layers have no position encoding (our layout, the
// RNoPE-SWA of the layout studies); its logits are scaled by logit_scale, which the import folds
// into the final norm's weight (the head reads nothing else), so the model needs no option for it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "roformer/convert/hf_json.h"

namespace roformer::convert {

inline constexpr const char* kCohere2Architecture = "Cohere2ForCausalLM";

// True for model_type cohere2.
bool is_cohere2_family(const std::string& model_type);

// Maps a Cohere 2 config.json into `out` (architecture, config, max_positions, logit_scale); a
// key we cannot honour is a UserError naming it.
void parse_cohere2_config(const nlohmann::json& hf, const std::string& where, HfConfig& out);

// Our parameter names for a Cohere 2 tensor: two for input_layernorm (the norms of both parallel
// sublayers), none for the tied lm_head or a rotary cache, one otherwise (the name unchanged for
// one we do not know).
std::vector<std::string> cohere2_parameter_names(const std::string& hf_name, bool tied_output);
// The Cohere 2 name of one of our parameters; "" for one it does not have (the feed-forward's norm,
// which repeats the attention's, and every LayerNorm bias, which must be zero).
std::string cohere2_hf_name(const std::string& ours);

}  // namespace roformer::convert
