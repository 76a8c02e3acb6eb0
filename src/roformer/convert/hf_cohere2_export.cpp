// Export of Cohere 2's block (see hf_cohere2_export.h): the block checked part by part, the
// weights checked where Cohere 2 has fewer than we do (one norm per layer, no norm biases), the
// RoPE settings checked by difference from what rope_parameters holds, config.json in
// transformers 5's spelling.
#include "roformer/convert/hf_cohere2_export.h"

#include <torch/torch.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "roformer/common/errors.h"
#include "roformer/config/layer_layout.h"
#include "roformer/convert/hf_cohere2.h"
#include "roformer/convert/hf_json.h"
#include "roformer/convert/hf_llama_export.h"
#include "roformer/convert/rope_fit.h"

namespace roformer::convert {
namespace {

using nlohmann::json;
using Refuse = std::function<void(const std::string&)>;

void check_cohere2_block(const config::ModelConfig& m, const Refuse& refuse) {
  if (m.objective != config::Objective::causal_lm) refuse("objective mlm (Cohere 2 is causal)");
  if (m.norm != config::NormPlacement::pre || !m.parallel_residual)
    refuse("sublayers one after the other (Cohere 2 adds attention and feed-forward side by side, parallel_residual)");
  if (m.ffn_bias || m.qkv_bias != m.output_bias) refuse("feed-forward biases, or biases on some projections only");
  if (m.embedding_norm || m.type_vocab_size > 0 || m.embed_dim() != m.hidden_size ||
      m.embed_scale != config::EmbedScale::none)
    refuse("an embedding norm, scale, token types or width of its own (Cohere 2 has none)");
  if (m.position.kind != config::PositionKind::rope && m.position.kind != config::PositionKind::none)
    refuse("its position encoding is '" + config::position_kind_names().name(m.position.kind) +
           "' (Cohere 2 has RoPE in its sliding layers, none in its global ones)");
  if (m.attention != config::AttentionKind::softmax || m.attention_normalizer != config::AttentionNormalizer::softmax ||
      m.qk_norm || m.output_gate || m.output_norm || m.kv_shift || m.attention_scale != config::AttentionScale::none ||
      m.explicit_head_dim > 0)
    refuse(
        "an attention option Cohere 2 lacks (linear or stick-breaking attention, QK-norm, an output gate or norm, "
        "a key/value shift, a query scale, a head width of its own)");
}

// layer_types and sliding_window: local layers a sliding window at the model's RoPE, global layers
// without position or window; a model without a layout has only global layers (so no RoPE).
std::pair<std::vector<std::string>, int64_t> cohere2_layers(const config::ModelConfig& m, const Refuse& refuse) {
  if (!config::has_layout(m)) {
    if (m.position.kind != config::PositionKind::none)
      refuse("RoPE in every layer (Cohere 2's global layers have no position encoding; its RoPE layers slide)");
    return {std::vector<std::string>(static_cast<size_t>(m.num_layers), "full_attention"), 4096};
  }
  const config::ModelConfig local = config::layer_model(m, false), global = config::layer_model(m, true);
  const config::AttentionWindowSpec lw = config::layer_window(m, false), gw = config::layer_window(m, true);
  if (local.position.kind != config::PositionKind::rope || lw.kind != config::WindowKind::sliding ||
      local.position.rope.base != m.position.rope.base ||
      local.position.rope.scaling.kind != m.position.rope.scaling.kind || local.qk_norm ||
      local.attention_scale != m.attention_scale)
    refuse("local layers other than a sliding window at the model's RoPE and its scaling");
  if (global.position.kind != config::PositionKind::none || gw.kind != config::WindowKind::none || global.qk_norm ||
      global.attention_scale != m.attention_scale)
    refuse("global layers other than full attention without a position encoding");
  std::vector<std::string> types;
  for (int64_t i = 0; i < m.num_layers; ++i)
    types.push_back(config::is_global_layer(m, i) ? "full_attention" : "sliding_attention");
  return {types, lw.size};
}

// Our tensors under Cohere 2's names; the feed-forward's norm must repeat the attention's and every
// LayerNorm bias must be zero (Cohere 2 has neither).
std::vector<std::pair<std::string, torch::Tensor>> cohere2_tensors(const config::ModelConfig& m,
                                                                   const std::string& checkpoint_dir,
                                                                   const Refuse& refuse) {
  std::map<std::string, torch::Tensor> ours;
  for (const auto& [name, t] : exported_parameters(m, checkpoint_dir)) ours[name] = t;
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& [name, t] : ours) {
    const std::string theirs = cohere2_hf_name(name);
    const size_t ffn_norm = name.find(".output.LayerNorm.weight");
    if (ffn_norm != std::string::npos && name.find("attention.output") == std::string::npos) {
      const std::string twin = name.substr(0, ffn_norm) + ".attention.output.LayerNorm.weight";
      if (!torch::equal(t, ours.at(twin)))
        refuse("the feed-forward's norm differs from the attention's in " + name.substr(0, ffn_norm) +
               " (Cohere 2 normalises a layer's input once for both)");
      continue;
    }
    if (name.find("LayerNorm.bias") != std::string::npos) {
      if (torch::count_nonzero(t).item<int64_t>() != 0) refuse("a LayerNorm bias that is not zero (" + name + ")");
      continue;
    }
    TORCH_CHECK(!theirs.empty(), "convert_native_to_cohere2: no Hugging Face name for ", name);
    out.emplace_back(theirs, t);
  }
  return out;
}

}  // namespace

ConversionSummary convert_native_to_cohere2(const config::Config& cfg, const std::string& checkpoint_dir,
                                            const std::string& out_dir) {
  const config::ModelConfig& m = cfg.model;
  const Refuse refuse = [&](const std::string& why) {
    throw UserError("checkpoint '" + checkpoint_dir + "' cannot be represented by Hugging Face Cohere 2: " + why);
  };
  if (cfg.finetune.task != config::FinetuneTask::none)
    refuse("it is a fine-tuned task model; the causal LM it was fine-tuned from exports");
  check_cohere2_block(m, refuse);
  config::RopeConfig cohere_rope;  // interleaved pairs of the whole head, any scaling transformers names
  cohere_rope.pairing = config::RopePairing::interleaved;
  cohere_rope.base = m.position.rope.base;
  if (m.position.rope.scaling.kind != config::RopeScalingKind::ntk) cohere_rope.scaling = m.position.rope.scaling;
  if (const std::string beyond = rope_settings_beyond(cfg, cohere_rope, "Cohere 2");
      m.position.kind == config::PositionKind::rope && !beyond.empty())
    refuse(
        "rope_parameters hold rope_theta and one scaling over interleaved pairs of the whole head; this "
        "checkpoint sets " +
        beyond);
  const auto [types, window] = cohere2_layers(m, refuse);
  const std::vector<std::pair<std::string, torch::Tensor>> tensors = cohere2_tensors(m, checkpoint_dir, refuse);
  const json hf = {{"architectures", {kCohere2Architecture}},
                   {"model_type", "cohere2"},
                   {"vocab_size", m.vocab_size},
                   {"hidden_size", m.hidden_size},
                   {"intermediate_size", m.ffn_size},
                   {"num_hidden_layers", m.num_layers},
                   {"num_attention_heads", m.num_heads},
                   {"num_key_value_heads", m.kv_heads()},
                   {"hidden_act", hf_json::activation_to_hf(m.activation)},
                   {"max_position_embeddings", hf_max_positions(cfg, checkpoint_dir)},
                   {"layer_norm_eps", m.layer_norm_eps},
                   {"initializer_range", m.init_std},
                   {"attention_dropout", m.attention_dropout},
                   {"attention_bias", m.qkv_bias},
                   {"tie_word_embeddings", m.tie_output},
                   {"logit_scale", 1.0},  // folded into model.norm.weight on the way in
                   {"layer_types", types},
                   {"sliding_window", window},
                   {"rope_parameters", hf_rope_parameters(m.position.rope)},
                   {"pad_token_id", nullptr},
                   {"bos_token_id", nullptr},
                   {"eos_token_id", nullptr},
                   {"dtype", "float32"}};
  write_hf_directory(out_dir, tensors, hf);
  return {kCohere2Architecture, static_cast<int64_t>(tensors.size()), ""};
}

}  // namespace roformer::convert
