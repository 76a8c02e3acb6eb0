// GPT-NeoX decoders from Hugging Face (GPTNeoXForCausalLM: Pythia, GPT-NeoX-20B), torch-free:
// their config.json as our config (pre-norm LayerNorm with bias, BERT's feed-forward with bias,
// attention and feed-forward side by side (use_parallel_residual), rotate-half RoPE on the first
// partial_rotary_factor of each head, an untied or tied linear head) and their tensor names as
// ours. Their fused query_key_value projection holds q, k and v per head ([heads, 3, head_dim]
// rows); the converters split it on the way in and rebuild it on the way out.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "roformer/convert/hf_json.h"

namespace roformer::convert {

inline constexpr const char* kNeoxArchitecture = "GPTNeoXForCausalLM";

// True for model_type gpt_neox.
bool is_neox_family(const std::string& model_type);

// Maps a GPT-NeoX config.json into `out` (architecture, config, max_positions), reading both of
// transformers' spellings (rope_parameters with partial_rotary_factor, or rotary_pct and
// rotary_emb_base); a key we cannot honour is a UserError naming it.
void parse_neox_config(const nlohmann::json& hf, const std::string& where, HfConfig& out);

// Our parameter name for a GPT-NeoX tensor: "" for one we do not keep (rotary caches, the old
// causal-mask buffers, embed_out when tied), encoder.layer.N.attention.query_key_value.{weight,
// bias} for the fused projection (to split, below), or the name unchanged for one we do not know.
std::string neox_parameter_name(const std::string& hf_name, bool tied_output);
// For such a fused name: our name of its part 0 (query), 1 (key) or 2 (value); "" for another name.
std::string neox_fused_qkv_part(const std::string& fused, int part);
// The GPT-NeoX name of one of our parameters, "" for one it does not have; q, k and v map to
// the fused query_key_value (neox_split_part says which part).
std::string neox_hf_name(const std::string& ours);
// 0, 1 or 2 for our attention.self.query, key or value parameters, -1 otherwise.
int neox_split_part(const std::string& ours);

}  // namespace roformer::convert
