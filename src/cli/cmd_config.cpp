// `roformer config check FILE [--set k=v ...]`: validate a config and print it resolved.
// `roformer config schema`: every key with its type, default and meaning.
#include <iostream>

#include "cli/cli_options.h"
#include "cli/commands.h"
#include "roformer/config/config_loader.h"

namespace roformer::cli {

void add_config_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<ConfigCheckArgs>();
  const auto [check, schema] = declare_config(app, *opts);
  check->callback([opts, &exit_code] {
    const config::LoadedConfig loaded = config::load_config(opts->file, opts->overrides);
    std::cout << "# resolved from " << opts->file;
    for (const auto& f : loaded.files)
      if (f != opts->file) std::cout << " (base " << f << ")";
    std::cout << "\n" << config::dump_yaml(loaded.config);
    exit_code = 0;
  });

  schema->callback([&exit_code] {
    std::cout << config::schema_text();
    exit_code = 0;
  });
}

}  // namespace roformer::cli
