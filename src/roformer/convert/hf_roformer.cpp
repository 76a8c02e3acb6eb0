// Hugging Face RoFormer <-> native checkpoints (see hf_roformer.h). The state-dict names are
// the same apart from the "roformer." prefix of the encoder; the rotary table
// (encoder.embed_positions: sin in the first half of each row, cos in the second, frequencies
// 10000^(-2j/d)) is not a weight of ours, since our RoPE computes the same angles, so it is
// checked on the way in and rebuilt on the way out.
#include "roformer/convert/hf_roformer.h"

#include <torch/torch.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "roformer/common/build_info.h"
#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/config/config_loader.h"
#include "roformer/config/layer_layout.h"
#include "roformer/convert/hf_cohere2.h"
#include "roformer/convert/hf_cohere2_export.h"
#include "roformer/convert/hf_config.h"
#include "roformer/convert/hf_gemma3.h"
#include "roformer/convert/hf_gemma3_export.h"
#include "roformer/convert/hf_json.h"
#include "roformer/convert/hf_llama.h"
#include "roformer/convert/hf_llama_export.h"
#include "roformer/convert/hf_neox.h"
#include "roformer/convert/hf_neox_export.h"
#include "roformer/convert/output_directory.h"
#include "roformer/convert/rope_fit.h"
#include "roformer/finetune/task_model.h"
#include "roformer/io/checkpoint.h"
#include "roformer/io/safetensors.h"
#include "roformer/model/encoder.h"
#include "roformer/model/position/rope_frequencies.h"
#include "roformer/runtime/memory_estimate.h"

namespace roformer::convert {
namespace {

using io::read_safetensors;
using io::SafetensorsFile;
using io::write_safetensors;

using nlohmann::json;
using Named = std::vector<std::pair<std::string, torch::Tensor>>;

// The rotary table HF RoFormer stores: row p = [sin(p w_0) .. sin(p w_{d/2-1}) | cos(p w_0) ..],
// w_j from our own frequency code at RoFormer's settings (base 10000, whole head, no scaling).
torch::Tensor rotary_table(int64_t positions, int64_t head_dim) {
  torch::Tensor t = torch::empty({positions, head_dim}, torch::kFloat64);
  auto a = t.accessor<double, 2>();
  const int64_t half = head_dim / 2;
  const std::vector<double> w = model::rope_frequencies(config::RopeConfig{}, head_dim, positions).inv_freq;
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t j = 0; j < half; ++j) {
      const double angle = static_cast<double>(p) * w[static_cast<size_t>(j)];
      a[p][j] = std::sin(angle);
      a[p][half + j] = std::cos(angle);
    }
  return t.to(torch::kFloat32);
}

// The weights of a Hugging Face folder: model.safetensors, or the index of a sharded checkpoint
// (model.safetensors.index.json). A folder with only pytorch_model.bin is told how to convert it.
std::string hf_weights_path(const std::string& hf_dir, const std::string& where) {
  for (const char* name : {"/model.safetensors", "/model.safetensors.index.json"})
    if (path_exists(hf_dir + name)) return hf_dir + name;
  const std::string weights = hf_dir + "/model.safetensors";
  if (path_exists(hf_dir + "/pytorch_model.bin"))
    throw UserError(where +
                    " has pytorch_model.bin but no model.safetensors; convert it once with: "
                    ".venv/bin/python -c \"import torch; from safetensors.torch import save_file; "
                    "sd = torch.load('" +
                    hf_dir +
                    "/pytorch_model.bin', map_location='cpu'); "
                    "save_file({k: v.contiguous() for k, v in sd.items()}, '" +
                    weights + "', metadata={'format': 'pt'})\"");
  throw UserError(where + " has no model.safetensors");
}

// Every tensor of the checkpoint: one file, or every shard the index names (each a file of the
// folder), each tensor found in the shard the index says.
SafetensorsFile read_hf_weights(const std::string& hf_dir, const std::string& weights) {
  if (weights.size() < 11 || weights.compare(weights.size() - 11, 11, ".index.json") != 0)
    return read_safetensors(weights);
  json index;
  try {
    index = json::parse(read_text_file(weights, kMaxConfigJsonBytes * 16));
  } catch (const json::exception& e) {
    throw UserError(weights + " is not valid JSON: " + e.what());
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw UserError(weights + " has no 'weight_map' object (tensor name -> shard file)");
  std::map<std::string, std::vector<std::string>> by_shard;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!shard.is_string()) throw UserError(weights + ": the shard of '" + name + "' must be a file name");
    const std::string file = shard.get<std::string>();
    check_path_component(file, weights + " shard");
    by_shard[file].push_back(name);
  }
  SafetensorsFile all;
  for (const auto& [file, names] : by_shard) {
    const std::string path = hf_dir + "/" + file;
    if (!path_exists(path)) throw UserError(weights + " names shard '" + file + "', which is missing");
    SafetensorsFile shard = read_safetensors(path);
    for (const std::string& name : names) {
      const torch::Tensor* t = shard.find(name);
      if (t == nullptr) throw UserError(path + " has no tensor '" + name + "', which " + weights + " puts there");
      all.tensors.emplace_back(name, *t);
    }
  }
  return all;
}

// Part 0, 1 or 2 (q, k, v) of GPT-NeoX's fused query_key_value weight [3H, H] or bias [3H],
// whose rows run [heads, 3, head_dim].
torch::Tensor neox_qkv_part(const torch::Tensor& fused, const config::ModelConfig& m, int part,
                            const std::string& name) {
  const int64_t heads = m.num_heads, D = m.head_dim();
  if (fused.dim() < 1 || fused.size(0) != 3 * heads * D)
    throw UserError("tensor '" + name + "' has shape " + c10::str(fused.sizes()) + " but the config implies " +
                    std::to_string(3 * heads * D) + " rows (q, k and v of " + std::to_string(heads) + " heads of " +
                    std::to_string(D) + ")");
  std::vector<int64_t> shape{heads, 3, D};
  for (int64_t d = 1; d < fused.dim(); ++d) shape.push_back(fused.size(d));
  std::vector<int64_t> out{heads * D};
  for (int64_t d = 1; d < fused.dim(); ++d) out.push_back(fused.size(d));
  return fused.reshape(shape).select(1, part).reshape(out).contiguous();
}

// A Cohere 2 tensor under our names: its one norm per layer as both parallel sublayers' (zero
// biases beside each LayerNorm weight), the final norm's weight times logit_scale (the logits'
// factor, which only the head reads).
void add_cohere2_tensor(const std::string& name, const torch::Tensor& t, bool tied, double logit_scale,
                        std::map<std::string, torch::Tensor>& by_name) {
  const torch::Tensor f = t.scalar_type() == torch::kFloat32 ? t : t.to(torch::kFloat32);
  for (const std::string& ours : cohere2_parameter_names(name, tied)) {
    const bool norm = ours.find("LayerNorm.weight") != std::string::npos;
    by_name[ours] = ours == "encoder.LayerNorm.weight" ? (f * logit_scale).contiguous() : f;
    if (norm) by_name[ours.substr(0, ours.size() - 6) + "bias"] = torch::zeros_like(f);
  }
}

// A Llama-family tensor in our layout: Qwen3's q_norm / k_norm weight, one [head_dim] row that
// every head shares, becomes our per-head [heads, head_dim]; every other tensor as it is.
torch::Tensor as_ours(const std::string& ours, const torch::Tensor& t, const config::ModelConfig& m) {
  if (!is_qk_norm_weight(ours) || t.dim() != 1) return t;  // another shape: named by the shape check
  const int64_t heads = ours.find(".q_norm.") != std::string::npos ? m.num_heads : m.kv_heads();
  return t.unsqueeze(0).expand({heads, t.size(0)}).contiguous();
}

}  // namespace

ConversionSummary convert_hf_to_native(const std::string& hf_dir, const std::string& out_dir) {
  const std::string where = "Hugging Face directory '" + hf_dir + "'";
  check_output_directory(out_dir);
  if (!is_directory(hf_dir)) throw UserError(where + " does not exist");
  if (!path_exists(hf_dir + "/config.json")) throw UserError(where + " has no config.json");
  const std::string weights = hf_weights_path(hf_dir, where);
  const HfConfig parsed = parse_hf_config(read_text_file(hf_dir + "/config.json", kMaxConfigJsonBytes), where,
                                          std::filesystem::path(hf_dir).filename().string());
  config::Config cfg = parsed.config;
  config::ModelConfig& m = cfg.model;
  const std::string& arch = parsed.architecture;
  const bool neox = arch == kNeoxArchitecture, gemma = arch == kGemma3Architecture;
  const bool cohere2 = arch == kCohere2Architecture;
  const bool llama = is_llama_architecture(arch) || gemma;  // Gemma 3: the same path, its own names

  // Tensors: strip the encoder prefix, check the rotary table, drop the tied decoder copies
  // (RoFormer); Llama-family names mapped to ours.
  const SafetensorsFile file = read_hf_weights(hf_dir, weights);
  const std::string prefix =
      arch == "RoFormerModel" && !file.find("roformer.embeddings.word_embeddings.weight") ? "" : "roformer.";
  std::map<std::string, torch::Tensor> by_name;  // our parameter name -> tensor
  std::vector<std::string> ignored;
  bool has_head = llama || neox || cohere2;
  for (const auto& [name, t] : file.tensors) {
    std::string ours;
    if (cohere2) {
      add_cohere2_tensor(name, t, m.tie_output, parsed.logit_scale, by_name);
      continue;
    }
    if (neox) {
      ours = neox_parameter_name(name, m.tie_output);
      const torch::Tensor f = t.scalar_type() == torch::kFloat32 ? t : t.to(torch::kFloat32);
      if (neox_fused_qkv_part(ours, 0).empty()) {
        if (!ours.empty()) by_name[ours] = f;
        continue;
      }
      for (int part = 0; part < 3; ++part) by_name[neox_fused_qkv_part(ours, part)] = neox_qkv_part(f, m, part, name);
      continue;
    }
    if (llama) {
      ours = gemma ? gemma3_parameter_name(name, m.tie_output) : llama_parameter_name(name, m.tie_output);
      if (!ours.empty())
        by_name[ours] = as_ours(ours, t.scalar_type() == torch::kFloat32 ? t : t.to(torch::kFloat32), m);
      continue;
    }
    if (name == prefix + "encoder.embed_positions.weight") {
      const torch::Tensor want = rotary_table(t.size(0), m.head_dim());
      // Saved in fp16/bf16, the sines carry that dtype's rounding (|value| <= 1).
      const double tol = t.scalar_type() == torch::kBFloat16 ? 8e-3 : (t.scalar_type() == torch::kHalf ? 1e-3 : 1e-5);
      if (t.dim() != 2 || t.size(1) != m.head_dim() || !torch::allclose(t.to(torch::kFloat32), want, tol, tol))
        throw UserError(weights + ": tensor '" + name +
                        "' is not the standard RoFormer rotary table (base 10000, "
                        "head dimension " +
                        std::to_string(m.head_dim()) + "); we cannot reproduce this model");
      continue;
    }
    if (name == "cls.predictions.decoder.weight" || name == "cls.predictions.decoder.bias") continue;  // tied
    if (!prefix.empty() && name.rfind(prefix, 0) == 0) {
      ours = name.substr(prefix.size());
    } else if (name.rfind("cls.predictions.", 0) == 0) {
      ours = name;
      has_head = true;
    } else if (prefix.empty() && (name.rfind("embeddings", 0) == 0 || name.rfind("encoder.", 0) == 0)) {
      ours = name;
    }
    if (ours.empty() || ours.rfind("pooler.", 0) == 0) {
      ignored.push_back(name);
      continue;
    }
    by_name[ours] = t.scalar_type() == torch::kFloat32 ? t : t.to(torch::kFloat32);
  }
  // A token-type table that is a single zero row carries nothing: our model then has none.
  const auto types = by_name.find("embeddings.token_type_embeddings.weight");
  if (types != by_name.end() && types->second.size(0) == 1 &&
      torch::count_nonzero(types->second).item<int64_t>() == 0) {
    m.type_vocab_size = 0;
    by_name.erase(types);
  }

  // The tensors must match the config's size before the model (sized by it) is built.
  if (!by_name.count("embeddings.word_embeddings.weight"))
    throw UserError(weights + ": has no tensor for our parameter 'embeddings.word_embeddings.weight' (expected '" +
                    prefix + "embeddings.word_embeddings.weight')");
  int64_t layers_present = 0;
  for (const auto& entry : by_name) {
    if (entry.first.rfind("encoder.layer.", 0) != 0) continue;
    int64_t index = 0;
    for (size_t i = 14; i < entry.first.size() && i < 14 + 9 && std::isdigit(entry.first[i]); ++i)
      index = index * 10 + (entry.first[i] - '0');
    layers_present = std::max(layers_present, index + 1);
  }
  if (layers_present != m.num_layers)
    throw UserError(where + ": config.json says num_hidden_layers " + std::to_string(m.num_layers) +
                    " but model.safetensors holds " + std::to_string(layers_present) + " layers");
  runtime::check_fits_device(runtime::estimate_memory(m, 0, 0, false, false), torch::kCPU, "converting this model",
                             "nothing here: it is the source's size; convert on a machine with more memory");
  model::EncoderModel model = model::build_model(m, 0);
  std::string notes;
  if (!has_head) {
    notes = "no LM head in the source (" + arch +
            "): cls.predictions.* are freshly initialised (seed 0), so logits "
            "are meaningless until fine-tuned; last_hidden_state is exact";
    for (const auto& p : model->named_parameters())
      if (p.key().rfind("cls.", 0) == 0) by_name[p.key()] = p.value().detach().clone();
  }
  // Every parameter found with its shape, in the model's order (as our own checkpoints).
  Named ordered;
  for (const auto& p : model->named_parameters()) {
    const auto it = by_name.find(p.key());
    if (it == by_name.end())
      throw UserError(weights + ": has no tensor for our parameter '" + p.key() + "' (expected '" +
                      (p.key().rfind("cls.", 0) == 0 ? p.key() : prefix + p.key()) + "')");
    if (it->second.sizes() != p.value().sizes())
      throw UserError(weights + ": tensor '" + it->first + "' has shape " + c10::str(it->second.sizes()) +
                      " but the config implies " + c10::str(p.value().sizes()));
    ordered.emplace_back(it->first, it->second);
    by_name.erase(it);
  }
  if (!by_name.empty()) {
    std::string extra;
    for (const auto& [n, t] : by_name) extra += (extra.empty() ? "" : ", ") + n;
    throw UserError(weights + ": tensors our " +
                    (has_head && arch.rfind("RoFormer", 0) != 0 ? arch : std::string("RoFormer")) +
                    " has no place for: " + extra);
  }
  if (!ignored.empty()) {
    std::string list;
    for (const auto& n : ignored) list += (list.empty() ? "" : ", ") + n;
    notes += (notes.empty() ? "" : "; ") + std::string("ignored tensors outside the encoder and LM head: ") + list;
  }

  write_directory(out_dir, [&](const std::string& tmp) {
    write_safetensors(tmp + "/model.safetensors", ordered,
                      {{"format", "pt"}, {"position", "rope"}, {"source", hf_dir}});
    write_file_atomic(tmp + "/config.yaml",
                      "# converted from Hugging Face " + arch + " at " + hf_dir + "\n" + config::dump_yaml(cfg));
    const json meta = {{"step", 0},
                       {"complete", true},
                       {"source", "huggingface"},
                       {"architecture", arch},
                       {"max_position_embeddings", parsed.max_positions},
                       {"git_revision", build_info().git_revision}};
    write_file_atomic(tmp + "/meta.json", meta.dump(2) + "\n");
  });
  return {arch, static_cast<int64_t>(ordered.size()), notes};
}

namespace {

// An MLM or causal-LM checkpoint's tensors under Hugging Face names (the LM head keeps `cls.`).
Named encoder_tensors(const config::ModelConfig& m, const std::string& checkpoint_dir) {
  model::EncoderModel model = model::build_model(m, 0);
  io::load_model_weights(checkpoint_dir, *model);
  Named tensors;
  for (const auto& p : model->named_parameters()) {
    const std::string& n = p.key();
    tensors.emplace_back(n.rfind("cls.", 0) == 0 ? n : "roformer." + n, p.value().detach().to(torch::kFloat32));
  }
  return tensors;
}

// A fine-tuned checkpoint's tensors: already `roformer.*` and `classifier.*`; the unused
// pretraining LM head (roformer.cls.*) has no place in RoFormerForSequenceClassification.
Named classifier_tensors(const config::Config& cfg, const std::string& checkpoint_dir) {
  finetune::TaskModel model(cfg.model, finetune::task_spec(cfg.finetune), 0.0, 0);
  io::load_model_weights(checkpoint_dir, *model);
  Named tensors;
  for (const auto& p : model->named_parameters())
    if (p.key().rfind("roformer.cls.", 0) != 0) tensors.emplace_back(p.key(), p.value().detach().to(torch::kFloat32));
  return tensors;
}

// num_labels (through id2label), the label names and the loss transformers would train with.
void add_classifier_fields(json& hf, const finetune::TaskSpec& spec) {
  json id2label = json::object(), label2id = json::object();
  for (int64_t i = 0; i < spec.num_labels; ++i) {
    const std::string name = spec.labels.empty() ? (spec.head == finetune::HeadKind::triplet ? "SCORE" : "LABEL_0")
                                                 : spec.labels[static_cast<size_t>(i)];
    id2label[std::to_string(i)] = name;
    label2id[name] = i;
  }
  hf["id2label"] = id2label;
  hf["label2id"] = label2id;
  hf["problem_type"] = spec.head == finetune::HeadKind::classification ? "single_label_classification" : "regression";
  hf["finetuning_task"] = spec.name;
}

}  // namespace

ConversionSummary convert_native_to_hf(const std::string& checkpoint_dir, const std::string& out_dir) {
  const config::Config cfg = io::checkpoint_config(checkpoint_dir);
  const config::ModelConfig& m = cfg.model;
  const std::string where = "checkpoint '" + checkpoint_dir + "'";
  check_output_directory(out_dir);
  if (m.lm_head == config::LmHeadKind::linear) {  // a decoder: GPT-NeoX's block, Gemma 3's, or Llama's
    if (m.norm == config::NormPlacement::sandwich) return convert_native_to_gemma3(cfg, checkpoint_dir, out_dir);
    if (m.norm_kind == config::NormKind::layer_norm && m.feed_forward == config::FeedForwardKind::glu)
      return convert_native_to_cohere2(cfg, checkpoint_dir, out_dir);
    return m.norm_kind == config::NormKind::layer_norm && m.feed_forward == config::FeedForwardKind::mlp
               ? convert_native_to_neox(cfg, checkpoint_dir, out_dir)
               : convert_native_to_llama(cfg, checkpoint_dir, out_dir);
  }
  auto refuse = [&](const std::string& why) {
    throw UserError(where + " cannot be represented by Hugging Face RoFormer: " + why);
  };
  if (m.position.kind != config::PositionKind::rope)
    refuse("its position encoding is '" + config::position_kind_names().name(m.position.kind) +
           "' (RoFormer has RoPE only)");
  config::RopeConfig roformer_rope;  // RoFormer's rotation: our defaults, rotary_value as config.json holds it
  roformer_rope.rotate_value = m.position.rope.rotate_value;
  const std::string beyond = rope_settings_beyond(cfg, roformer_rope, "RoFormer");
  if (!beyond.empty())
    refuse(
        "RoFormer rotates every pair of the whole head, adjacent pairs at base 10000, with no scaling or remap; "
        "this checkpoint sets " +
        beyond);
  if (m.norm != config::NormPlacement::post) refuse("pre-LayerNorm (RoFormer is post-LN like BERT)");
  if (m.norm_kind != config::NormKind::layer_norm) refuse("RMSNorm (RoFormer normalises with LayerNorm)");
  if (m.kv_heads() != m.num_heads) refuse("grouped-query attention (RoFormer has a key and value per head)");
  if (m.feed_forward != config::FeedForwardKind::mlp) refuse("a gated feed-forward layer (RoFormer's is BERT's MLP)");
  if (m.attention != config::AttentionKind::softmax) refuse("linear attention (RoFormer attends with softmax)");
  if (m.embed_scale != config::EmbedScale::none)
    refuse("embed_scale is sqrt_d (RoFormer does not scale its token embeddings)");
  if (m.attention_normalizer != config::AttentionNormalizer::softmax)
    refuse("stick-breaking attention (RoFormer normalises with softmax)");
  if (config::has_layout(m)) refuse("a per-layer layout (RoFormer's layers are all alike)");
  if (m.qk_norm || m.output_gate || m.output_norm || m.kv_shift)
    refuse("QK-norm, an output gate or norm, or a key/value shift (RoFormer's attention has none)");
  if (!m.qkv_bias || !m.output_bias || !m.ffn_bias) refuse("a projection without its bias (RoFormer's have one each)");
  if (!m.embedding_norm) refuse("no LayerNorm on the embeddings (RoFormer normalises them)");
  if (m.lm_head != config::LmHeadKind::transform || !m.tie_output)
    refuse("a linear or untied output head (RoFormer's is BERT's transform, tied to the embeddings)");
  if (m.attention_scale != config::AttentionScale::none &&
      m.attention_scale != config::AttentionScale::logn_past_training)
    refuse("its queries are scaled by model.attention_scale (RoFormer has no such scale)");

  runtime::check_fits_device(runtime::estimate_memory(m, 0, 0, false, false), torch::kCPU, "converting this model",
                             "nothing here: it is the source's size; convert on a machine with more memory");
  const bool causal = m.objective == config::Objective::causal_lm;
  const bool classifier = cfg.finetune.task != config::FinetuneTask::none;
  if (classifier && finetune::task_spec(cfg.finetune).bi_encoder)
    refuse(
        "it is a triplet bi-encoder (cosine of mean states, no classification head); RoFormerModel holds its "
        "encoder: convert the pretrained checkpoint instead");
  if (classifier && causal)
    refuse(
        "it was fine-tuned from a causal encoder, whose head reads the last token; "
        "RoFormerForSequenceClassification reads [CLS]");
  const std::string arch = classifier ? "RoFormerForSequenceClassification"
                           : causal   ? "RoFormerForCausalLM"
                                      : "RoFormerForMaskedLM";
  int64_t max_positions = std::max<int64_t>(1536, cfg.data.seq_len);
  for (int64_t l : cfg.eval.lengths) max_positions = std::max(max_positions, l);
  max_positions = std::max(max_positions, cfg.finetune.max_length);

  bool has_types = false;
  Named tensors = classifier ? classifier_tensors(cfg, checkpoint_dir) : encoder_tensors(m, checkpoint_dir);
  for (const auto& [n, t] : tensors) has_types |= n == "roformer.embeddings.token_type_embeddings.weight";
  if (!has_types)  // RoFormer always adds a token-type embedding: one zero row adds nothing
    tensors.emplace_back("roformer.embeddings.token_type_embeddings.weight", torch::zeros({1, m.embed_dim()}));
  tensors.emplace_back("roformer.encoder.embed_positions.weight", rotary_table(max_positions, m.head_dim()));

  json hf = {{"architectures", {arch}},
             {"model_type", "roformer"},
             {"vocab_size", m.vocab_size},
             {"embedding_size", m.embed_dim()},
             {"hidden_size", m.hidden_size},
             {"num_hidden_layers", m.num_layers},
             {"num_attention_heads", m.num_heads},
             {"intermediate_size", m.ffn_size},
             {"hidden_act", hf_json::activation_to_hf(m.activation)},
             {"hidden_dropout_prob", m.hidden_dropout},
             {"attention_probs_dropout_prob", m.attention_dropout},
             {"max_position_embeddings", max_positions},
             {"type_vocab_size", has_types ? m.type_vocab_size : 1},
             {"initializer_range", m.init_std},
             {"layer_norm_eps", m.layer_norm_eps},
             {"pad_token_id", 0},
             {"rotary_value", m.position.rope.rotate_value},
             {"is_decoder", causal},
             {"tie_word_embeddings", true},
             {"dtype", "float32"}};
  if (classifier) add_classifier_fields(hf, finetune::task_spec(cfg.finetune));
  write_directory(out_dir, [&](const std::string& tmp) {
    write_safetensors(tmp + "/model.safetensors", tensors, {{"format", "pt"}});
    write_file_atomic(tmp + "/config.json", hf.dump(2) + "\n");
  });
  return {arch, static_cast<int64_t>(tensors.size()), ""};
}

}  // namespace roformer::convert
