// `roformer config check FILE [--set k=v ...]`: validate a config and print it resolved.
// `roformer config schema`: every key with its type, default and meaning.
// `roformer config rope FILE [--length N]`: the RoPE frequencies of FILE's model, as JSON.
#include <nlohmann/json.hpp>

#include <iostream>

#include "cli/cli_options.h"
#include "cli/commands.h"
#include "roformer/common/errors.h"
#include "roformer/config/config_loader.h"
#include "roformer/config/position_families.h"
#include "roformer/model/position/rope_frequencies.h"

namespace roformer::cli {

void add_config_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<ConfigCheckArgs>();
  const auto [check, schema, rope] = declare_config(app, *opts);
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
    const config::LoadedConfig loaded = config::load_config(opts->file, opts->overrides);
    const config::ModelConfig& m = loaded.config.model;
    if (!config::position_family(m.position.kind).traits.rotary)
      throw UserError(opts->file + ": model.position.kind is " + config::position_kind_names().name(m.position.kind) +
                      ", which has no RoPE frequencies; use a rope or xpos config");
    const int64_t rotary_dim = m.position.rope.resolved_rotary_dim(m.head_dim());
    const int64_t length = opts->length > 0 ? opts->length : loaded.config.data.seq_len;
    const model::RopeFrequencies f = model::rope_frequencies(m.position.rope, rotary_dim, length);
    const nlohmann::json out{{"rotary_dim", rotary_dim},
                             {"length", length},
                             {"inv_freq", f.inv_freq},
                             {"position_scale", f.position_scale},
                             {"magnitude", f.magnitude}};
    std::cout << out.dump() << "\n";
    exit_code = 0;
  });
}

}  // namespace roformer::cli
