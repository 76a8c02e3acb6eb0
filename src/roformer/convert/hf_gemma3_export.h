// Our checkpoints of Gemma 3's decoder block (model.norm sandwich with the 1 + weight RMSNorm, a
// linear output head) as a Hugging Face Gemma3ForCausalLM directory, the way back of the import
// in hf_gemma3.h: a Gemma 3 imported, extended or trained here loads in transformers.
#pragma once

#include <string>

#include "roformer/config/config.h"
#include "roformer/convert/output_directory.h"

namespace roformer::convert {

// CHECKPOINT_DIR (with its config `cfg`) -> OUT_DIR holding config.json and model.safetensors. A
// setting Gemma 3 cannot hold is a UserError naming it, before anything is written.
ConversionSummary convert_native_to_gemma3(const config::Config& cfg, const std::string& checkpoint_dir,
                                           const std::string& out_dir);

}  // namespace roformer::convert
