// Export of the Llama-family block (see hf_llama_export.h): the block checked part by part, the
// RoPE settings checked by difference from what config.json's rope_parameters can hold, the
// tensors under transformers' names (hf_llama.cpp), config.json in transformers 5's spelling.
#include "roformer/convert/hf_llama_export.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/config/config_loader.h"
#include "roformer/config/layer_layout.h"
#include "roformer/convert/hf_json.h"
#include "roformer/convert/hf_llama.h"
#include "roformer/convert/output_directory.h"
#include "roformer/convert/rope_fit.h"
#include "roformer/io/checkpoint.h"
#include "roformer/io/safetensors.h"
#include "roformer/model/encoder.h"
#include "roformer/runtime/memory_estimate.h"

namespace roformer::convert {
namespace {

using nlohmann::json;
using Refuse = std::function<void(const std::string&)>;

// SmolLM3's NoPE layers, if that is all the model's layout is (some layers without RoPE, nothing
// else per layer): no_rope_layers, 1 for a layer with RoPE and 0 without; empty otherwise.
std::vector<int> no_rope_layers(const config::ModelConfig& m) {
  if (!config::has_layout(m)) return {};
  for (const bool global : {false, true}) {
    const config::ModelConfig k = config::layer_model(m, global);
    const bool position = global ? k.position.kind == config::PositionKind::none : k.position.kind == m.position.kind;
    if (!position || config::layer_window(m, global).kind != config::WindowKind::none || k.qk_norm != m.qk_norm ||
        k.attention_scale != m.attention_scale || k.position.rope.base != m.position.rope.base ||
        k.position.rope.scaling.kind != m.position.rope.scaling.kind)
      return {};
  }
  std::vector<int> layers;
  for (int64_t i = 0; i < m.num_layers; ++i) layers.push_back(config::is_global_layer(m, i) ? 0 : 1);
  return layers;
}

// Sliding windows, if that is all the model's layout is (local layers: a sliding window at the
// model's RoPE; global layers: the model's attention; nothing else per layer): the window and
// layer_types (Mistral v0.1 windows every layer, Qwen2 and Qwen3 the layers it names); {0, {}}
// otherwise.
struct WindowLayers {
  int64_t window = 0;
  std::vector<std::string> types;  // sliding_attention or full_attention, per layer
  bool every_layer() const {
    return window > 0 &&
           std::all_of(types.begin(), types.end(), [](const auto& t) { return t == "sliding_attention"; });
  }
};

WindowLayers window_layers(const config::ModelConfig& m) {
  if (!config::has_layout(m)) return {};
  for (const bool global : {false, true}) {
    const config::ModelConfig k = config::layer_model(m, global);
    const config::WindowKind expected = global ? config::WindowKind::none : config::WindowKind::sliding;
    if (k.position.kind != m.position.kind || k.qk_norm != m.qk_norm || k.attention_scale != m.attention_scale ||
        k.position.rope.base != m.position.rope.base || k.position.rope.scaling.kind != m.position.rope.scaling.kind ||
        config::layer_window(m, global).kind != expected)
      return {};
  }
  WindowLayers w{config::layer_window(m, false).size, {}};
  for (int64_t i = 0; i < m.num_layers; ++i)
    w.types.push_back(config::is_global_layer(m, i) ? "full_attention" : "sliding_attention");
  if (std::find(w.types.begin(), w.types.end(), "sliding_attention") == w.types.end()) return {};
  return w;
}

// The block, part by part: what LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM and
// SmolLM3ForCausalLM compute.
void check_block(const config::ModelConfig& m, const Refuse& refuse) {
  if (m.objective != config::Objective::causal_lm) refuse("objective mlm (the Llama family is causal)");
  if (m.norm != config::NormPlacement::pre) refuse("post-norm layers (the Llama family normalises first)");
  if (m.norm_kind != config::NormKind::rms_norm) refuse("LayerNorm (the Llama family normalises with RMSNorm)");
  if (m.feed_forward != config::FeedForwardKind::glu) refuse("BERT's MLP (the Llama family's feed-forward is gated)");
  if (m.embedding_norm) refuse("a LayerNorm on the embeddings (the Llama family has none)");
  if (m.type_vocab_size > 0 || m.embed_dim() != m.hidden_size)
    refuse("token types or an embedding width apart from hidden_size (the Llama family has neither)");
  if (m.position.kind != config::PositionKind::rope)
    refuse("its position encoding is '" + config::position_kind_names().name(m.position.kind) +
           "' (the Llama family has RoPE only)");
  if (m.attention != config::AttentionKind::softmax || m.attention_normalizer != config::AttentionNormalizer::softmax)
    refuse("linear or stick-breaking attention (the Llama family attends with softmax)");
  if (config::has_layout(m) && no_rope_layers(m).empty() && window_layers(m).window == 0)
    refuse(
        "a per-layer layout beyond NoPE layers or sliding-window layers, every layer at the model's RoPE base "
        "and scaling (SmolLM3's no_rope_layers, Mistral's and Qwen's sliding_window are the ones the Llama family "
        "has)");
  if (m.output_gate || m.output_norm || m.kv_shift)
    refuse("an output gate or norm, or a key/value shift (the Llama family's attention has none)");
  if (m.qk_norm && (m.qkv_bias || m.output_bias || m.ffn_bias))
    refuse("QK-norm with biases (Qwen3, the family's one model with QK-norm, has neither)");
  if (m.attention_scale != config::AttentionScale::none) refuse("a query scale (model.attention_scale)");
  if (m.embed_scale != config::EmbedScale::none) refuse("scaled embeddings (model.embed_scale)");
  if (m.qkv_bias != m.output_bias && (m.output_bias || m.ffn_bias))
    refuse("biases on some projections only, as neither Llama (attention_bias, mlp_bias) nor Qwen2 (q, k, v) has");
}

}  // namespace

// rope_parameters: rope_theta and the scaling under transformers' names (ROPE_INIT_FUNCTIONS).
nlohmann::json hf_rope_parameters(const config::RopeConfig& r) {
  const config::RopeScalingConfig& s = r.scaling;
  json p = {{"rope_theta", r.base}, {"rope_type", "default"}};
  if (s.kind == config::RopeScalingKind::none) return p;
  p["factor"] = s.factor;
  switch (s.kind) {
    case config::RopeScalingKind::linear:
      p["rope_type"] = "linear";
      break;
    case config::RopeScalingKind::dynamic_ntk:
      p["rope_type"] = "dynamic";  // its training length is max_position_embeddings
      break;
    case config::RopeScalingKind::yarn:
      p.update({{"rope_type", "yarn"},
                {"original_max_position_embeddings", s.original_max_positions},
                {"beta_fast", s.beta_fast},
                {"beta_slow", s.beta_slow},
                {"truncate", s.truncate}});
      if (s.attention_factor > 0) p["attention_factor"] = s.attention_factor;
      if (s.mscale > 0) p.update({{"mscale", s.mscale}, {"mscale_all_dim", s.mscale_all_dim}});
      break;
    case config::RopeScalingKind::llama3:
      p.update({{"rope_type", "llama3"},
                {"original_max_position_embeddings", s.original_max_positions},
                {"low_freq_factor", s.low_freq_factor},
                {"high_freq_factor", s.high_freq_factor}});
      break;
    case config::RopeScalingKind::longrope:
      p.update({{"rope_type", "longrope"},
                {"original_max_position_embeddings", s.original_max_positions},
                {"short_factor", s.short_factor},
                {"long_factor", s.long_factor}});
      if (s.attention_factor > 0) p["attention_factor"] = s.attention_factor;
      break;
    default:
      break;
  }
  return p;
}

// max_position_embeddings: dynamic NTK's training length; the extended length of the other
// scalings (transformers derives some defaults from its ratio to the original length); else the
// imported checkpoint's own (meta.json), at least the lengths the run trained and evaluated.
int64_t hf_max_positions(const config::Config& cfg, const std::string& checkpoint_dir) {
  const config::RopeScalingConfig& s = cfg.model.position.rope.scaling;
  if (s.kind == config::RopeScalingKind::dynamic_ntk) return s.original_max_positions;
  if (s.kind != config::RopeScalingKind::none && s.kind != config::RopeScalingKind::linear)
    return static_cast<int64_t>(std::llround(double(s.original_max_positions) * s.factor));
  int64_t n = cfg.data.seq_len;
  for (const int64_t l : cfg.eval.lengths) n = std::max(n, l);
  const json meta = json::parse(read_text_file(checkpoint_dir + "/meta.json"), nullptr, false);
  if (meta.is_object() && meta.contains("max_position_embeddings") &&
      meta["max_position_embeddings"].is_number_integer())
    n = std::max(n, meta["max_position_embeddings"].get<int64_t>());
  return n;
}

torch::Tensor qk_norm_as_one_row(const std::string& ours, const torch::Tensor& t, const std::string& model) {
  if (!is_qk_norm_weight(ours)) return t;
  if (!torch::equal(t, t.narrow(0, 0, 1).expand_as(t)))
    throw UserError("parameter '" + ours + "' holds a weight per head; " + model +
                    "'s QK-norm has one weight that every head shares, so this checkpoint cannot be exported as " +
                    model);
  return t.select(0, 0).contiguous();
}

std::vector<std::pair<std::string, torch::Tensor>> exported_parameters(const config::ModelConfig& m,
                                                                       const std::string& checkpoint_dir) {
  runtime::check_fits_device(runtime::estimate_memory(m, 0, 0, false, false), torch::kCPU, "converting this model",
                             "nothing here: it is the source's size; convert on a machine with more memory");
  model::EncoderModel model = model::build_model(m, 0);
  io::load_model_weights(checkpoint_dir, *model);
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : model->named_parameters()) out.emplace_back(p.key(), p.value().detach().to(torch::kFloat32));
  return out;
}

void write_hf_directory(const std::string& out_dir, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                        const nlohmann::json& hf) {
  write_directory(out_dir, [&](const std::string& tmp) {
    io::write_safetensors(tmp + "/model.safetensors", tensors, {{"format", "pt"}});
    write_file_atomic(tmp + "/config.json", hf.dump(2) + "\n");
  });
}

ConversionSummary convert_native_to_llama(const config::Config& cfg, const std::string& checkpoint_dir,
                                          const std::string& out_dir) {
  const config::ModelConfig& m = cfg.model;
  const Refuse refuse = [&](const std::string& why) {
    throw UserError("checkpoint '" + checkpoint_dir +
                    "' cannot be represented by a Hugging Face Llama-family model: " + why);
  };
  if (cfg.finetune.task != config::FinetuneTask::none)
    refuse("it is a fine-tuned task model; the causal LM it was fine-tuned from exports");
  check_block(m, refuse);
  config::RopeConfig llama_rope;  // rotate_half pairs at rope_theta, with any scaling transformers names
  llama_rope.pairing = config::RopePairing::half;
  llama_rope.base = m.position.rope.base;
  if (m.position.rope.scaling.kind != config::RopeScalingKind::ntk) llama_rope.scaling = m.position.rope.scaling;
  if (const std::string beyond = rope_settings_beyond(cfg, llama_rope, "Llama"); !beyond.empty())
    refuse(
        "rope_parameters hold rope_theta and one scaling over rotate-half pairs of the whole head; this "
        "checkpoint sets " +
        beyond);
  const bool qwen2 = m.qkv_bias && !m.output_bias && !m.ffn_bias, qwen3 = m.qk_norm;
  const std::vector<int> nope = no_rope_layers(m);
  if (qwen2 && !nope.empty()) refuse("Qwen2's q, k, v biases with NoPE layers (no Hugging Face class has both)");
  if (qwen3 && !nope.empty()) refuse("QK-norm with NoPE layers (no Hugging Face class has both)");
  if (qwen3 && m.qk_norm_eps != m.layer_norm_eps)
    refuse("a QK-norm epsilon apart from the layers' (Qwen3's q_norm and k_norm use rms_norm_eps)");
  const WindowLayers windows = window_layers(m);
  const bool qwen = qwen2 || qwen3, mistral = windows.window > 0 && !qwen;
  if (mistral && !windows.every_layer())
    refuse(
        "sliding windows on some layers only without Qwen2's biases or Qwen3's QK-norm (Mistral, the "
        "family's other model with a window, windows every layer)");
  if (mistral && (m.qkv_bias || m.output_bias || m.ffn_bias))
    refuse("a sliding window with biases other than Qwen2's (q, k and v only)");
  const std::string arch = !nope.empty() ? "SmolLM3ForCausalLM"
                           : mistral     ? "MistralForCausalLM"
                           : qwen3       ? "Qwen3ForCausalLM"
                           : qwen2       ? "Qwen2ForCausalLM"
                                         : "LlamaForCausalLM";

  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& [ours, t] : exported_parameters(m, checkpoint_dir)) {
    const std::string name = llama_hf_name(ours);
    TORCH_CHECK(!name.empty(), "convert_native_to_llama: no Hugging Face name for ", ours);
    tensors.emplace_back(name, qk_norm_as_one_row(ours, t, "Qwen3"));
  }
  json hf = {{"architectures", {arch}},
             {"model_type", !nope.empty() ? "smollm3"
                            : mistral     ? "mistral"
                            : qwen3       ? "qwen3"
                            : qwen2       ? "qwen2"
                                          : "llama"},
             {"vocab_size", m.vocab_size},
             {"hidden_size", m.hidden_size},
             {"intermediate_size", m.ffn_size},
             {"num_hidden_layers", m.num_layers},
             {"num_attention_heads", m.num_heads},
             {"num_key_value_heads", m.kv_heads()},
             {"head_dim", m.head_dim()},
             {"hidden_act", hf_json::activation_to_hf(m.activation)},
             {"max_position_embeddings", hf_max_positions(cfg, checkpoint_dir)},
             {"rms_norm_eps", m.layer_norm_eps},
             {"initializer_range", m.init_std},
             {"attention_dropout", m.attention_dropout},
             {"tie_word_embeddings", m.tie_output},
             {"rope_parameters", hf_rope_parameters(m.position.rope)},
             // Token ids we do not keep: none rather than the class's defaults (SmolLM3's pad id
             // 128004 lies outside a smaller vocabulary, and transformers refuses that embedding).
             {"pad_token_id", nullptr},
             {"bos_token_id", nullptr},
             {"eos_token_id", nullptr},
             {"dtype", "float32"}};
  if (!qwen2 && !mistral) hf.update({{"attention_bias", m.qkv_bias}, {"mlp_bias", m.ffn_bias}});
  if (mistral) hf["sliding_window"] = windows.window;
  if (qwen) {
    const auto first = std::find(windows.types.begin(), windows.types.end(), "sliding_attention");
    hf.update({{"layer_types", windows.window > 0
                                   ? windows.types
                                   : std::vector<std::string>(static_cast<size_t>(m.num_layers), "full_attention")},
               {"use_sliding_window", windows.window > 0},
               {"sliding_window", windows.window > 0 ? json(windows.window) : json(nullptr)},
               {"max_window_layers", windows.window > 0 ? first - windows.types.begin() : m.num_layers}});
  }
  if (!nope.empty())
    hf.update({{"no_rope_layers", nope},
               {"layer_types", std::vector<std::string>(static_cast<size_t>(m.num_layers), "full_attention")},
               {"use_sliding_window", false}});
  write_hf_directory(out_dir, tensors, hf);
  return {arch, static_cast<int64_t>(tensors.size()), ""};
}

}  // namespace roformer::convert
