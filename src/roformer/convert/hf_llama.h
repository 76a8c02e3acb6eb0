// Llama-family decoders from Hugging Face (LlamaForCausalLM: Llama 2/3.x, TinyLlama, SmolLM and
// SmolLM2; MistralForCausalLM; Qwen2ForCausalLM; Qwen3ForCausalLM (its head_dim and QK-norm);
// SmolLM3ForCausalLM, its NoPE layers as our layout), torch-free: their config.json as our config (the
// decoder block as model options: pre-norm RMSNorm, SwiGLU, grouped-query attention, rotate-half
// RoPE at rope_theta with its rope scaling, biases as the architecture has them, no embedding
// norm, a linear head, tied or not) and their tensor names as ours, both ways.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "roformer/convert/hf_json.h"

namespace roformer::convert {

// True for the model_type values this file maps (llama, mistral, qwen2, qwen3, smollm3).
bool is_llama_family(const std::string& model_type);
// True for the architectures it maps (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM,
// SmolLM3ForCausalLM).
bool is_llama_architecture(const std::string& architecture);

// Maps a Llama-family config.json into `out` (architecture, config, max_positions); a key we cannot
// honour (an active sliding window, an unknown rope type)
// is a UserError naming it. `where` names the source in messages.
void parse_llama_config(const nlohmann::json& hf, const std::string& where, HfConfig& out);

// The RoPE of a decoder's config.json onto ours: rotate-half pairs at rope_theta (or GPT-NeoX's
// rotary_emb_base), and the scaling of `rope_parameters` / `rope_scaling` (linear, dynamic, yarn,
// llama3, longrope) with the keys transformers' ROPE_INIT_FUNCTIONS read.
void map_hf_rope(const nlohmann::json& hf, const std::string& where, int64_t max_positions, config::RopeConfig& rope);

// Our parameter name for a tensor of a Llama-family checkpoint, "" for one we do not keep (rotary
// caches; lm_head.weight when the output is tied to the embeddings), or the name unchanged for
// one we do not know (the converter then names it as a tensor the model has no place for).
std::string llama_parameter_name(const std::string& hf_name, bool tied_output);
// The Hugging Face name of one of our parameters in a model converted from (or exportable as) a
// Llama-family checkpoint, or "" for a parameter that family does not have.
std::string llama_hf_name(const std::string& ours);
// True for our QK-norm weights (attention.q_norm / k_norm, [heads, head_dim]), which Qwen3 keeps
// as one [head_dim] row every head shares.
bool is_qk_norm_weight(const std::string& ours);

}  // namespace roformer::convert
