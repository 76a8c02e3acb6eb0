// Export of Gemma 3's block (see hf_gemma3_export.h): the block checked part by part, the layout
// as layer_types with the two layer types' RoPE bases, QK-norm weights back to one row, config.json
// in transformers 5's spelling.
#include "roformer/convert/hf_gemma3_export.h"

#include <torch/torch.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/config/config_loader.h"
#include "roformer/config/layer_layout.h"
#include "roformer/convert/hf_gemma3.h"
#include "roformer/convert/hf_json.h"
#include "roformer/convert/hf_llama.h"
#include "roformer/convert/hf_llama_export.h"
#include "roformer/convert/rope_fit.h"
#include "roformer/io/checkpoint.h"
#include "roformer/io/safetensors.h"
#include "roformer/model/encoder.h"
#include "roformer/runtime/memory_estimate.h"

namespace roformer::convert {
namespace {

using nlohmann::json;
using Refuse = std::function<void(const std::string&)>;

// The block, part by part: what Gemma3ForCausalLM computes.
void check_gemma3_block(const config::ModelConfig& m, const Refuse& refuse) {
  if (m.objective != config::Objective::causal_lm) refuse("objective mlm (only the causal Gemma 3 exports)");
  if (m.norm_kind != config::NormKind::rms_norm || m.norm_weight_offset != 1.0)
    refuse("a norm other than RMSNorm scaled by 1 + weight (Gemma3RMSNorm)");
  if (m.feed_forward != config::FeedForwardKind::glu || m.ffn_bias)
    refuse("a feed-forward other than the gated one without biases (Gemma3MLP)");
  if (m.embed_scale != config::EmbedScale::sqrt_d || m.embedding_norm || m.type_vocab_size > 0 ||
      m.embed_dim() != m.hidden_size)
    refuse("embeddings not scaled by sqrt(hidden_size), or with a norm, token types or a width of their own");
  if (m.position.kind != config::PositionKind::rope) refuse("a position family other than RoPE");
  if (!m.qk_norm || m.qk_norm_eps != m.layer_norm_eps)
    refuse("attention without QK-norm, or with an epsilon apart from the layers' (Gemma 3 has both alike)");
  if (m.attention != config::AttentionKind::softmax || m.attention_normalizer != config::AttentionNormalizer::softmax ||
      m.output_gate || m.output_norm || m.kv_shift || m.attention_scale != config::AttentionScale::none ||
      m.parallel_residual)
    refuse(
        "an attention or layer option Gemma 3 lacks (linear or stick-breaking attention, an output gate or norm, "
        "a key/value shift, a query scale, parallel sublayers)");
  if (m.qkv_bias != m.output_bias) refuse("biases on some attention projections only (attention_bias is one)");
}

// layer_types, sliding_window and the two layer types' RoPE from our layout (none: all global).
void add_layout(json& hf, const config::ModelConfig& m, const Refuse& refuse) {
  std::vector<std::string> types;
  double local_base = m.position.rope.base;
  int64_t window = 0;
  if (config::has_layout(m)) {
    for (const bool global : {false, true}) {
      const config::ModelConfig k = config::layer_model(m, global);
      const config::AttentionWindowSpec w = config::layer_window(m, global);
      const bool ok = k.position.kind == m.position.kind && k.attention_scale == m.attention_scale && k.qk_norm &&
                      (global ? w.kind == config::WindowKind::none : w.kind == config::WindowKind::sliding);
      if (!ok) refuse("a layout other than sliding-window RoPE layers and global RoPE layers, QK-norm in both");
      if (global && k.position.rope.base != m.position.rope.base) refuse("a global RoPE base apart from the model's");
      if (global && k.position.rope.scaling.kind != m.position.rope.scaling.kind)
        refuse("global layers without the model's RoPE scaling (Gemma 3 scales its global layers)");
      if (!global && k.position.rope.scaling.kind != config::RopeScalingKind::none)
        refuse(
            "a RoPE scaling on the sliding layers (Gemma 3 scales its global layers only: "
            "model.layout.local.rope_scaling off)");
      if (!global) local_base = k.position.rope.base, window = w.size;
    }
  }
  for (int64_t i = 0; i < m.num_layers; ++i)
    types.push_back(config::has_layout(m) && !config::is_global_layer(m, i) ? "sliding_attention" : "full_attention");
  hf["layer_types"] = types;
  hf["sliding_window"] = window > 0 ? window : 4096;  // unused where every layer is global
  hf["rope_parameters"] = {{"full_attention", hf_rope_parameters(m.position.rope)},
                           {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", local_base}}}};
}

}  // namespace

ConversionSummary convert_native_to_gemma3(const config::Config& cfg, const std::string& checkpoint_dir,
                                           const std::string& out_dir) {
  const config::ModelConfig& m = cfg.model;
  const Refuse refuse = [&](const std::string& why) {
    throw UserError("checkpoint '" + checkpoint_dir + "' cannot be represented by Hugging Face Gemma 3: " + why);
  };
  if (cfg.finetune.task != config::FinetuneTask::none)
    refuse("it is a fine-tuned task model; the causal LM it was fine-tuned from exports");
  check_gemma3_block(m, refuse);
  config::RopeConfig
      gemma_rope;  // rotate-half pairs of the whole head, the global layers with any scaling transformers names
  gemma_rope.pairing = config::RopePairing::half;
  gemma_rope.base = m.position.rope.base;
  if (m.position.rope.scaling.kind != config::RopeScalingKind::ntk) gemma_rope.scaling = m.position.rope.scaling;
  if (const std::string beyond = rope_settings_beyond(cfg, gemma_rope, "Gemma 3"); !beyond.empty())
    refuse("its rope_parameters hold one rotation per layer type, a scaling on the global one; this checkpoint sets " +
           beyond);
  json hf = {{"architectures", {kGemma3Architecture}},
             {"model_type", "gemma3_text"},
             {"vocab_size", m.vocab_size},
             {"hidden_size", m.hidden_size},
             {"intermediate_size", m.ffn_size},
             {"num_hidden_layers", m.num_layers},
             {"num_attention_heads", m.num_heads},
             {"num_key_value_heads", m.kv_heads()},
             {"head_dim", m.head_dim()},
             {"query_pre_attn_scalar", m.score_scale_dim > 0 ? m.score_scale_dim : m.head_dim()},
             {"hidden_activation", hf_json::activation_to_hf(m.activation)},
             {"max_position_embeddings", hf_max_positions(cfg, checkpoint_dir)},
             {"rms_norm_eps", m.layer_norm_eps},
             {"initializer_range", m.init_std},
             {"attention_dropout", m.attention_dropout},
             {"attention_bias", m.qkv_bias},
             {"tie_word_embeddings", m.tie_output},
             {"attn_logit_softcapping", nullptr},
             {"final_logit_softcapping", nullptr},
             {"use_bidirectional_attention", false},
             {"pad_token_id", nullptr},
             {"bos_token_id", nullptr},
             {"eos_token_id", nullptr},
             {"dtype", "float32"}};
  add_layout(hf, m, refuse);
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& [ours, t] : exported_parameters(m, checkpoint_dir)) {
    const std::string name = gemma3_hf_name(ours);
    TORCH_CHECK(!name.empty(), "convert_native_to_gemma3: no Hugging Face name for ", ours);
    tensors.emplace_back(name, qk_norm_as_one_row(ours, t, "Gemma 3"));
  }
  write_hf_directory(out_dir, tensors, hf);
  return {kGemma3Architecture, static_cast<int64_t>(tensors.size()), ""};
}

}  // namespace roformer::convert
