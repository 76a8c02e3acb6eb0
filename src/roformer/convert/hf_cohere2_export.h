// Our checkpoints of Cohere 2's block (one LayerNorm without bias before attention and the SwiGLU
// feed-forward side by side; sliding-window layers with interleaved RoPE, global layers without a
// position encoding) as a Hugging Face Cohere2ForCausalLM directory, the way back of the import in
// hf_cohere2.h. The logit factor stays folded in the final norm: config.json says logit_scale 1.
#pragma once

#include <string>

#include "roformer/config/config.h"
#include "roformer/convert/output_directory.h"

namespace roformer::convert {

// CHECKPOINT_DIR (with its config `cfg`) -> OUT_DIR holding config.json and model.safetensors. A
// setting Cohere 2 cannot hold (two different norms in a layer, a LayerNorm bias that is not zero,
// RoPE in a global layer, ...) is a UserError naming it, before anything is written.
ConversionSummary convert_native_to_cohere2(const config::Config& cfg, const std::string& checkpoint_dir,
                                            const std::string& out_dir);

}  // namespace roformer::convert
