// Our checkpoints of GPT-NeoX's decoder block (pre-norm LayerNorm, BERT's feed-forward, a linear
// output head) as a Hugging Face GPTNeoXForCausalLM directory, the way back of the import in
// hf_neox.h: a Pythia-shaped model imported, extended or trained here loads in transformers.
#pragma once

#include <string>

#include "roformer/config/config.h"
#include "roformer/convert/output_directory.h"

namespace roformer::convert {

// CHECKPOINT_DIR (with its config `cfg`) -> OUT_DIR holding config.json and model.safetensors;
// q, k and v fused back into query_key_value ([heads, 3, head_dim] rows). A setting GPT-NeoX
// cannot hold is a UserError naming it, before anything is written.
ConversionSummary convert_native_to_neox(const config::Config& cfg, const std::string& checkpoint_dir,
                                         const std::string& out_dir);

}  // namespace roformer::convert
