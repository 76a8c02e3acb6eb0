// `roformer config check FILE [--set k=v ...]`: validate a config and print it resolved.
// `roformer config schema`: every key with its type, default and meaning.
#include <iostream>

#include "cli/commands.h"
#include "roformer/config/config_loader.h"

namespace roformer::cli {

void add_config_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("config", "Validate, resolve and document configs");
  cmd->require_subcommand(1);

  struct CheckOptions {
    std::string file;
    std::vector<std::string> overrides;
  };
  auto opts = std::make_shared<CheckOptions>();
  CLI::App* check = cmd->add_subcommand("check",
                                        "Validate FILE (with its base chain and --set overrides) and "
                                        "print the resolved config as YAML");
  check->add_option("file", opts->file, "YAML config file")->required();
  check->add_option("--set", opts->overrides, "override a key: --set model.num_layers=4 (repeatable)")
      ->allow_extra_args(false);
  check->callback([opts, &exit_code] {
    const config::LoadedConfig loaded = config::load_config(opts->file, opts->overrides);
    std::cout << "# resolved from " << opts->file;
    for (const auto& f : loaded.files)
      if (f != opts->file) std::cout << " (base " << f << ")";
    std::cout << "\n" << config::dump_yaml(loaded.config);
    exit_code = 0;
  });

  CLI::App* schema = cmd->add_subcommand("schema", "List every config key: type, default, meaning");
  schema->callback([&exit_code] {
    std::cout << config::schema_text();
    exit_code = 0;
  });
}

}  // namespace roformer::cli
