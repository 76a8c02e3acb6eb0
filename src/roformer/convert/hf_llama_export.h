// Our checkpoints of the Llama-family decoder block (a linear output head) as a Hugging Face
// LlamaForCausalLM, Qwen2ForCausalLM or (with NoPE layers) SmolLM3ForCausalLM directory, the way back of the import in
// hf_llama.h: a model imported, extended or trained here loads in transformers.
#pragma once

#include <string>

#include "roformer/config/config.h"
#include "roformer/convert/output_directory.h"

namespace roformer::convert {

// CHECKPOINT_DIR (with its config `cfg`) -> OUT_DIR holding config.json and model.safetensors.
// A setting the Hugging Face class cannot hold (a position family other than RoPE, a RoPE setting
// or scaling it has no key for, a block part it lacks) is a UserError naming it, before anything
// is written.
ConversionSummary convert_native_to_llama(const config::Config& cfg, const std::string& checkpoint_dir,
                                          const std::string& out_dir);

}  // namespace roformer::convert
