// Export of GPT-NeoX's block (see hf_neox_export.h): the block checked part by part, the RoPE
// settings checked by difference from what rope_parameters can hold (rotate-half pairs of the
// first partial_rotary_factor of the head), the fused projection rebuilt, config.json in
// transformers 5's spelling.
#include "roformer/convert/hf_neox_export.h"

#include <torch/torch.h>

#include <array>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/config/config_loader.h"
#include "roformer/config/layer_layout.h"
#include "roformer/convert/hf_json.h"
#include "roformer/convert/hf_llama_export.h"
#include "roformer/convert/hf_neox.h"
#include "roformer/convert/rope_fit.h"
#include "roformer/io/checkpoint.h"
#include "roformer/io/safetensors.h"
#include "roformer/model/encoder.h"
#include "roformer/runtime/memory_estimate.h"

namespace roformer::convert {
namespace {

using nlohmann::json;
using Refuse = std::function<void(const std::string&)>;

// The block, part by part: what GPTNeoXForCausalLM computes.
void check_neox_block(const config::ModelConfig& m, const Refuse& refuse) {
  if (m.objective != config::Objective::causal_lm) refuse("objective mlm (GPT-NeoX is causal)");
  if (m.norm != config::NormPlacement::pre) refuse("post-norm layers (GPT-NeoX normalises first)");
  if (m.feed_forward != config::FeedForwardKind::mlp || !m.ffn_bias)
    refuse("a feed-forward other than two Linears with biases (GPTNeoXMLP)");
  if (m.embedding_norm || m.type_vocab_size > 0 || m.embed_dim() != m.hidden_size)
    refuse("an embedding norm, token types or an embedding width of its own (GPT-NeoX has none)");
  if (m.position.kind != config::PositionKind::rope)
    refuse("its position encoding is '" + config::position_kind_names().name(m.position.kind) +
           "' (GPT-NeoX has RoPE only)");
  if (m.attention != config::AttentionKind::softmax || m.attention_normalizer != config::AttentionNormalizer::softmax)
    refuse("linear or stick-breaking attention (GPT-NeoX attends with softmax)");
  if (config::has_layout(m)) refuse("a per-layer layout (GPT-NeoX's layers are alike)");
  if (m.kv_heads() != m.num_heads || m.explicit_head_dim > 0)
    refuse("grouped-query attention or a head width of its own (GPT-NeoX fuses q, k, v of full heads)");
  if (m.qk_norm || m.output_gate || m.output_norm || m.kv_shift)
    refuse("QK-norm, an output gate or norm, or a key/value shift (GPT-NeoX's attention has none)");
  if (m.attention_scale != config::AttentionScale::none) refuse("a query scale (model.attention_scale)");
  if (m.embed_scale != config::EmbedScale::none) refuse("scaled embeddings (model.embed_scale)");
  if (m.qkv_bias != m.output_bias)
    refuse("a bias on q, k, v but not on the output projection, or the reverse (GPT-NeoX's attention_bias is one)");
}

// Our q, k and v (weights [H, H] or biases [H]) as GPT-NeoX's fused [3H, ...], rows [heads, 3, D].
torch::Tensor fused_qkv(const std::array<torch::Tensor, 3>& parts, const config::ModelConfig& m) {
  std::vector<torch::Tensor> per_head;
  for (const torch::Tensor& p : parts) {
    std::vector<int64_t> shape{m.num_heads, 1, m.head_dim()};
    for (int64_t d = 1; d < p.dim(); ++d) shape.push_back(p.size(d));
    per_head.push_back(p.reshape(shape));
  }
  const torch::Tensor fused = torch::cat(per_head, 1);  // [heads, 3, D, ...]
  std::vector<int64_t> out{3 * m.num_heads * m.head_dim()};
  for (int64_t d = 3; d < fused.dim(); ++d) out.push_back(fused.size(d));
  return fused.reshape(out).contiguous();
}

}  // namespace

ConversionSummary convert_native_to_neox(const config::Config& cfg, const std::string& checkpoint_dir,
                                         const std::string& out_dir) {
  const config::ModelConfig& m = cfg.model;
  const Refuse refuse = [&](const std::string& why) {
    throw UserError("checkpoint '" + checkpoint_dir + "' cannot be represented by Hugging Face GPT-NeoX: " + why);
  };
  if (cfg.finetune.task != config::FinetuneTask::none)
    refuse("it is a fine-tuned task model; the causal LM it was fine-tuned from exports");
  check_neox_block(m, refuse);
  config::RopeConfig neox_rope;  // rotate-half pairs of the first rotary_dim features, any scaling transformers names
  neox_rope.pairing = config::RopePairing::half;
  neox_rope.base = m.position.rope.base;
  neox_rope.rotary_dim = m.position.rope.rotary_dim;
  if (m.position.rope.scaling.kind != config::RopeScalingKind::ntk) neox_rope.scaling = m.position.rope.scaling;
  if (const std::string beyond = rope_settings_beyond(cfg, neox_rope, "GPT-NeoX"); !beyond.empty())
    refuse(
        "rope_parameters hold rope_theta, partial_rotary_factor and one scaling over rotate-half pairs; this "
        "checkpoint sets " +
        beyond);
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  std::map<std::string, std::array<torch::Tensor, 3>> qkv;  // fused name -> q, k, v
  for (const auto& [ours, t] : exported_parameters(m, checkpoint_dir)) {
    const std::string name = neox_hf_name(ours);
    TORCH_CHECK(!name.empty(), "convert_native_to_neox: no Hugging Face name for ", ours);
    const int part = neox_split_part(ours);
    if (part < 0) {
      tensors.emplace_back(name, t);
      continue;
    }
    std::array<torch::Tensor, 3>& parts = qkv[name];
    parts[static_cast<size_t>(part)] = t;
    if (parts[0].defined() && parts[1].defined() && parts[2].defined()) tensors.emplace_back(name, fused_qkv(parts, m));
  }
  const int64_t head_dim = m.head_dim(), rotary = m.position.rope.resolved_rotary_dim(head_dim);
  json rope = hf_rope_parameters(m.position.rope);
  rope["partial_rotary_factor"] = static_cast<double>(rotary) / static_cast<double>(head_dim);
  const json hf = {{"architectures", {kNeoxArchitecture}},
                   {"model_type", "gpt_neox"},
                   {"vocab_size", m.vocab_size},
                   {"hidden_size", m.hidden_size},
                   {"intermediate_size", m.ffn_size},
                   {"num_hidden_layers", m.num_layers},
                   {"num_attention_heads", m.num_heads},
                   {"hidden_act", hf_json::activation_to_hf(m.activation)},
                   {"max_position_embeddings", hf_max_positions(cfg, checkpoint_dir)},
                   {"layer_norm_eps", m.layer_norm_eps},
                   {"initializer_range", m.init_std},
                   {"attention_dropout", m.attention_dropout},
                   {"hidden_dropout", m.hidden_dropout},
                   {"use_parallel_residual", m.parallel_residual},
                   {"attention_bias", m.qkv_bias},
                   {"tie_word_embeddings", m.tie_output},
                   {"rope_parameters", rope},
                   {"pad_token_id", nullptr},
                   {"bos_token_id", nullptr},
                   {"eos_token_id", nullptr},
                   {"dtype", "float32"}};
  write_hf_directory(out_dir, tensors, hf);
  return {kNeoxArchitecture, static_cast<int64_t>(tensors.size()), ""};
}

}  // namespace roformer::convert
