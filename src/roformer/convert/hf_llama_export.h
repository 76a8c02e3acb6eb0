// Our checkpoints of the Llama-family decoder block (a linear output head) as a Hugging Face
// LlamaForCausalLM, Qwen2ForCausalLM or (with NoPE layers) SmolLM3ForCausalLM directory, the way back of the import in
// hf_llama.h: a model imported, extended or trained here loads in transformers.
#pragma once

#include <torch/torch.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "roformer/config/config.h"
#include "roformer/convert/output_directory.h"

namespace roformer::convert {

// CHECKPOINT_DIR (with its config `cfg`) -> OUT_DIR holding config.json and model.safetensors.
// A setting the Hugging Face class cannot hold (a position family other than RoPE, a RoPE setting
// or scaling it has no key for, a block part it lacks) is a UserError naming it, before anything
// is written.
ConversionSummary convert_native_to_llama(const config::Config& cfg, const std::string& checkpoint_dir,
                                          const std::string& out_dir);

// What the decoder exports share (GPT-NeoX's too, hf_neox_export.h): rope_parameters, rope_theta
// and the scaling under transformers' names (ROPE_INIT_FUNCTIONS' keys); max_position_embeddings,
// dynamic NTK's training length, the extended length of the other scalings, else the imported
// checkpoint's own (meta.json), at least the lengths the run trained and evaluated.
nlohmann::json hf_rope_parameters(const config::RopeConfig& r);
// Our QK-norm weight ([heads, head_dim]) as the one row every head shares in Qwen3's and Gemma 3's
// (`model` names the format in the error where the heads differ); any other tensor unchanged.
torch::Tensor qk_norm_as_one_row(const std::string& ours, const torch::Tensor& t, const std::string& model);
// The checkpoint's parameters in float32, under our names in the model's order (refused first,
// naming the estimate, if the model would not fit this machine).
std::vector<std::pair<std::string, torch::Tensor>> exported_parameters(const config::ModelConfig& m,
                                                                       const std::string& checkpoint_dir);
// OUT_DIR with model.safetensors (`tensors`, under their names) and config.json (`hf`), whole or not at all.
void write_hf_directory(const std::string& out_dir, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                        const nlohmann::json& hf);
int64_t hf_max_positions(const config::Config& cfg, const std::string& checkpoint_dir);

}  // namespace roformer::convert
