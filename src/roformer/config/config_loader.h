// Loading a Config: defaults <- base chain <- file <- --set overrides, each layer typed and
// range-checked as it is applied, then cross-field validation and resolution of derived
// defaults. Every error is a UserError naming file:line:col (or the --set), the key path
// and the fix. Also: the resolved YAML dump and the schema listing.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "roformer/config/config.h"

namespace roformer::config {

// Where each key path got its value: "file.yaml:3:5" or "--set model.num_layers=4".
using Origins = std::map<std::string, std::string>;

struct LoadedConfig {
  Config config;
  Origins origins;
  std::vector<std::string> files;  // the files read, base first
};

// Reads `path` (following `base:` links) and applies `overrides` ("a.b=c"), then validates
// and resolves. Throws UserError.
LoadedConfig load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// Defaults with overrides only (no file), validated and resolved.
LoadedConfig load_overrides(const std::vector<std::string>& overrides);

// Applies overrides to an already loaded config (e.g. eval-time `--set` on a checkpoint's
// config), re-validating and re-resolving it.
void apply_overrides(LoadedConfig& loaded, const std::vector<std::string>& overrides);

// Applies a config file (following its `base:` links) onto `loaded`, as a file layer; not
// validated (apply_overrides validates).
void apply_config_file(LoadedConfig& loaded, const std::string& path);

// Parses a YAML text (label names it in errors) onto `loaded`, as a file layer.
void apply_yaml_text(LoadedConfig& loaded, const std::string& text, const std::string& label);

// Cross-field checks; throws UserError naming the keys and where they were set.
void validate(const Config& config, const Origins& origins);

// Fills derived defaults (rotary_dim 0 -> head_dim, scaling length 0 -> data.seq_len).
void resolve(Config& config);

// The resolved config as YAML, every field present; loading it gives the same Config.
std::string dump_yaml(const Config& config);

// Two lines for the console: the model, the data and the training budget of a run.
std::string config_summary(const Config& config);

// One line per field: key path, type, default, help.
std::string schema_text();
// The same keys as markdown tables, one per top-level section (docs/configs.md embeds it).
std::string schema_markdown();

// Keys that define the architecture (a checkpoint refuses to load if any differs).
std::vector<std::pair<std::string, std::string>> flatten(const Config& config);

}  // namespace roformer::config
