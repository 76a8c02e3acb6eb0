// Conversion between Hugging Face RoFormer directories (config.json + model.safetensors of
// RoFormerModel, RoFormerForMaskedLM or RoFormerForCausalLM) and our checkpoints. Both ways
// write into a temporary directory renamed into place; inputs that Hugging Face RoFormer or
// our model cannot represent are refused with the reason, before anything is written.
#pragma once

#include "roformer/convert/output_directory.h"

#include <string>

namespace roformer::convert {

// HF_DIR -> OUT_DIR holding model.safetensors, config.yaml and meta.json (loadable by
// `roformer eval` and `roformer forward`).
ConversionSummary convert_hf_to_native(const std::string& hf_dir, const std::string& out_dir);

// A checkpoint directory (RoPE, interleaved pairs, base 10000, whole head, post-LN; pretrained,
// or fine-tuned by `roformer finetune` -> RoFormerForSequenceClassification; a model with the
// Llama-family block -> LlamaForCausalLM or Qwen2ForCausalLM, hf_llama_export.h) -> OUT_DIR
// with config.json and model.safetensors for transformers' from_pretrained.
ConversionSummary convert_native_to_hf(const std::string& checkpoint_dir, const std::string& out_dir);

}  // namespace roformer::convert
