// `roformer config check FILE [--set k=v ...]`: validate a config and print it resolved.
// `roformer config schema`: every key with its type, default and meaning.
// `roformer config rope FILE [--length N] [--queries FILE]`: the RoPE frequencies of FILE's
// model, as JSON (one line per query).
// `roformer config layers FILE [--length N] [--queries FILE]`: each layer's settings (and key
// visibility), as JSON (one line per query).
#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>
#include <iostream>

#include "cli/cli_options.h"
#include "cli/commands.h"
#include "roformer/common/errors.h"
#include "roformer/config/config_loader.h"
#include "roformer/config/layer_layout.h"
#include "roformer/config/position_families.h"
#include "roformer/model/attention_mask.h"
#include "roformer/model/position/rope_frequencies.h"

namespace roformer::cli {
namespace {

// Each layer's kind and settings; with length > 0 also which keys each query sees ("visible",
// [S][S] of 0/1) through the attention mask the model builds (window and causality).
nlohmann::json layers_json(const config::Config& c, int64_t length) {
  const config::ModelConfig& m = c.model;
  nlohmann::json layers = nlohmann::json::array();
  for (int64_t i = 0; i < m.num_layers; ++i) {
    const bool global = config::is_global_layer(m, i);
    const config::ModelConfig k = config::layer_model(m, global);
    const config::AttentionWindowSpec w = config::layer_window(m, global);
    nlohmann::json layer{{"index", i},
                         {"kind", global ? "global" : "local"},
                         {"position", config::position_kind_names().name(k.position.kind)},
                         {"rope_base", k.position.rope.base},
                         {"window_kind", config::window_kind_names().name(w.kind)},
                         {"window", w.size},
                         {"attention_scale", config::attention_scale_names().name(k.attention_scale)},
                         {"qk_norm", k.qk_norm}};
    if (length > 0) {
      const bool causal = m.objective == config::Objective::causal_lm;
      const model::AttentionMask mask({}, {}, causal, length, torch::kFloat32, torch::kCPU, /*always=*/true,
                                      model::AttentionMask::kWholeMaskBytes,
                                      {w.size, w.kind == config::WindowKind::chunked});
      const torch::Tensor seen = mask.defined() ? (mask.whole().view({-1, length}) > -1e29).to(torch::kInt)
                                                : torch::ones({length, length}, torch::kInt);
      const auto a = seen.accessor<int, 2>();
      std::vector<std::vector<int>> rows(length, std::vector<int>(length));
      for (int64_t q = 0; q < length; ++q)
        for (int64_t key = 0; key < length; ++key) rows[q][key] = a[q][key];
      layer["visible"] = rows;
    }
    layers.push_back(layer);
  }
  return {{"layout", config::describe_layout(m)}, {"layers", layers}};
}

// The RoPE frequencies of `file`'s model (with `overrides`) on a pass of `length` tokens (0: the
// training length).
nlohmann::json rope_json(const std::string& file, const std::vector<std::string>& overrides, int64_t length) {
  const config::LoadedConfig loaded = config::load_config(file, overrides);
  const config::ModelConfig& m = loaded.config.model;
  if (!config::position_family(m.position.kind).traits.rotary)
    throw UserError(file + ": model.position.kind is " + config::position_kind_names().name(m.position.kind) +
                    ", which has no RoPE frequencies; use a rope or xpos config");
  const int64_t rotary_dim = m.position.rope.resolved_rotary_dim(m.head_dim());
  if (length <= 0) length = loaded.config.data.seq_len;
  const model::RopeFrequencies f = model::rope_frequencies(m.position.rope, rotary_dim, length);
  return {{"rotary_dim", rotary_dim},
          {"length", length},
          {"inv_freq", f.inv_freq},
          {"position_scale", f.position_scale},
          {"magnitude", f.magnitude}};
}

// One line of a --queries file: {"length": N, "set": ["key=value", ...]}, both optional.
std::pair<int64_t, std::vector<std::string>> parse_query(const std::string& where, const std::string& line) {
  const nlohmann::json q = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& why) {
    return UserError(where + ": " + why + R"(; each line is {"length": N, "set": ["key=value", ...]})");
  };
  if (!q.is_object()) throw bad("not a JSON object");
  int64_t length = 0;
  std::vector<std::string> sets;
  for (const auto& [key, value] : q.items()) {
    if (key == "length" && value.is_number_integer() && value.get<int64_t>() >= 0) {
      length = value.get<int64_t>();
    } else if (key == "set" && value.is_array()) {
      for (const auto& s : value) {
        if (!s.is_string()) throw bad("\"set\" holds a non-string");
        sets.push_back(s.get<std::string>());
      }
    } else {
      throw bad("unexpected \"" + key + "\" (or a value of the wrong type)");
    }
  }
  return {length, sets};
}

// Prints answer(overrides, length) as one JSON line for the one pass of the command line, or for
// each query of its --queries file (its overrides after the command line's).
using QueryAnswer = std::function<nlohmann::json(const std::vector<std::string>&, int64_t)>;
void print_answers(const ConfigCheckArgs& a, const QueryAnswer& answer) {
  if (a.queries.empty()) {
    std::cout << answer(a.overrides, a.length).dump() << "\n";
    return;
  }
  std::ifstream in(a.queries);
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = a.queries + ":" + std::to_string(n);
    auto [length, sets] = parse_query(where, line);
    std::vector<std::string> overrides = a.overrides;
    overrides.insert(overrides.end(), sets.begin(), sets.end());
    try {
      std::cout << answer(overrides, length).dump() << "\n";
    } catch (const UserError& e) {
      throw UserError(where + ": " + e.what());
    }
  }
}

}  // namespace

void add_config_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<ConfigCheckArgs>();
  const auto [check, schema, rope, layers] = declare_config(app, *opts);
  check->callback([opts, &exit_code] {
    const config::LoadedConfig loaded = config::load_config(opts->file, opts->overrides);
    std::cout << "# resolved from " << opts->file;
    for (const auto& f : loaded.files)
      if (f != opts->file) std::cout << " (base " << f << ")";
    std::cout << "\n" << config::dump_yaml(loaded.config);
    exit_code = 0;
  });

  schema->callback([opts, &exit_code] {
    std::cout << (opts->markdown ? config::schema_markdown() : config::schema_text());
    exit_code = 0;
  });

  rope->callback([opts, &exit_code] {
    print_answers(*opts, [&](const std::vector<std::string>& overrides, int64_t length) {
      return rope_json(opts->file, overrides, length);
    });
    exit_code = 0;
  });

  layers->callback([opts, &exit_code] {
    print_answers(*opts, [&](const std::vector<std::string>& overrides, int64_t length) {
      return layers_json(config::load_config(opts->file, overrides).config, length);
    });
    exit_code = 0;
  });
}

}  // namespace roformer::cli
