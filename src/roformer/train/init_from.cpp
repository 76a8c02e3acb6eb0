// train.init_from: where the weights come from and whether they fit (see the header).
#include "roformer/train/init_from.h"

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/config/position_families.h"
#include "roformer/io/checkpoint.h"

namespace roformer::train {

InitSource resolve_init_source(const std::string& path) {
  if (!path_exists(path))
    throw UserError("train.init_from: '" + path +
                    "' does not exist; point it at a checkpoint (RUN/checkpoints/step_N)");
  if (io::is_complete_checkpoint(path)) {  // meta.json is valid JSON with "complete": true
    const auto meta = nlohmann::json::parse(read_text_file(path + "/meta.json"));
    const auto step = meta.find("step");
    return {path, step != meta.end() && step->is_number_integer() ? step->get<int64_t>() : 0};
  }
  if (const auto latest = io::latest_checkpoint(path)) return {latest->dir, latest->step};
  // A converted model (roformer convert hf-to-native): its weights and config, no training state.
  if (path_exists(path + "/model.safetensors") && path_exists(path + "/config.yaml") &&
      !is_directory(path + "/checkpoints"))
    return {path, 0};
  throw UserError("train.init_from: '" + path +
                  "' is neither a checkpoint (RUN/checkpoints/step_N, with model.safetensors and meta.json, or a "
                  "converted model with model.safetensors and config.yaml), a run directory that has one, nor a "
                  "Hugging Face model folder");
}

namespace {

bool drope(const config::Config& current) {
  return current.train.init_protocol == config::InitProtocol::drope;
}

// DroPE: the source's family, when it has no parameters, gives way to kind none; QK-norm may join.
config::Config as_dropped(config::Config saved, const config::Config& current, const InitSource& source) {
  const config::PositionKind kind = saved.model.position.kind;
  const std::string name = config::position_kind_names().name(kind);
  if (config::position_parameters(saved.model) > 0 || config::position_family(kind).traits.embeds)
    throw UserError("train.init_protocol drope: " + source.dir + " has position kind " + name +
                    ", whose positions live in its weights; DroPE drops a parameter-free family acting in attention "
                    "(rope, xpos, alibi, ...): start from such a checkpoint, or use train.init_protocol weights");
  saved.model.position.kind = config::PositionKind::none;
  if (current.model.qk_norm) saved.model.qk_norm = true;
  return saved;
}

// "model.a.b" and its value as the nested YAML mapping a config file would hold.
std::string nested_yaml(const std::string& key, const std::string& value) {
  std::string text, indent;
  size_t start = 0;
  for (size_t dot = key.find('.'); dot != std::string::npos; start = dot + 1, dot = key.find('.', start)) {
    text += indent + key.substr(start, dot - start) + ":\n";
    indent += "  ";
  }
  return text + indent + key.substr(start) + ": " + value + "\n";
}

}  // namespace

void inherit_model(config::LoadedConfig& loaded, const config::Config& source, const std::string& from) {
  std::vector<std::string> inherited;
  for (const auto& [key, value] : config::flatten(source)) {
    if (key.rfind("model.", 0) != 0 || loaded.origins.count(key) ||
        config::belongs_to_unused_family(key, source.model.position.kind))
      continue;
    config::apply_yaml_text(loaded, nested_yaml(key, value), from);
    inherited.push_back(key);
  }
  for (const std::string& key : inherited) loaded.origins[key] = from;
  config::apply_overrides(loaded, {});  // validated and resolved again
}

void check_init_compatible(const config::Config& saved_config, const config::Config& current,
                           const InitSource& source) {
  const config::Config saved = drope(current) ? as_dropped(saved_config, current, source) : saved_config;
  const auto d = io::first_architecture_difference(saved, current);
  if (!d) return;
  if (d->key == "model.position.max_positions" && config::position_length_limit(current.model) > 0) {
    const bool grow = std::strtoll(d->current.c_str(), nullptr, 10) > std::strtoll(d->saved.c_str(), nullptr, 10);
    throw UserError(
        "train.init_from: the learned position table of " + source.dir + " has " + d->saved +
        " rows and this run asks for " + d->current + "; a learned table " +
        (grow ? "cannot grow (rows past " + d->saved + " were never trained, and no rule for them is defined here)"
              : "cannot shrink (its rows are the checkpoint's weights, one per position)") +
        ": keep model.position.max_positions=" + d->saved + " and data.seq_len within it" +
        (grow ? ", or extend a RoPE model" : ""));
  }
  throw UserError("train.init_from: " + source.dir + " has " + d->key + " = " + d->saved + " but this run has " +
                  d->current + "; the weights only fit the same architecture (set " + d->key + "=" + d->saved +
                  "; the length, RoPE scaling, learning rate and data may differ)");
}

std::function<bool(const std::string&)> weights_new_in_this_run(const config::Config& saved,
                                                                const config::Config& current) {
  if (!drope(current) || saved.model.qk_norm || !current.model.qk_norm) return {};
  return [](const std::string& name) {  // attention's q_norm / k_norm, which start at 1
    return name.find(".q_norm.") != std::string::npos || name.find(".k_norm.") != std::string::npos;
  };
}

}  // namespace roformer::train
