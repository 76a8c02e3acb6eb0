// libFuzzer target: the `roformer` command line. Input: arguments separated by newlines (the
// first is the command word). They are parsed by the same option declarations the binary uses
// (src/cli/cli_options.cpp), then checked the way the commands check them before any work:
// eval's flags become runtime overrides applied to the default config, --depths is parsed,
// --set goes through the config loader. A bad command line must end in a CLI11 parse error or
// a UserError; anything else escaping (a std exception, a crash, UB) is a bug.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_options.h"
#include "roformer/common/errors.h"
#include "roformer/config/config_loader.h"

using namespace roformer;

namespace {

void check_overrides(const std::vector<std::string>& overrides) {
  config::LoadedConfig loaded;
  config::apply_overrides(loaded, overrides);
}

void parse_and_check(std::vector<std::string> args) {
  CLI::App app{"roformer"};
  app.require_subcommand(1);
  app.fallthrough();
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "console log level");
  cli::TrainArgs train;
  cli::EvalArgs eval;
  cli::SweepArgs sweep;
  cli::ConfigCheckArgs check;
  cli::ConvertArgs convert;
  cli::ForwardArgs forward;
  CLI::App* train_cmd = cli::declare_train(app, train);
  CLI::App* eval_cmd = cli::declare_eval(app, eval);
  cli::declare_sweep(app, sweep);
  const auto config_cmds = cli::declare_config(app, check);
  cli::declare_convert(app, convert);
  CLI::App* forward_cmd = cli::declare_forward(app, forward);
  if (!args.empty() && !args[0].empty() && args[0][0] != '-') cli::unknown_command_message(app, args[0]);
  std::vector<char*> argv{const_cast<char*>("roformer")};
  for (auto& a : args) argv.push_back(a.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  if (train_cmd->parsed()) check_overrides(train.overrides);
  if (config_cmds.check->parsed() || config_cmds.rope->parsed()) check_overrides(check.overrides);
  if (forward_cmd->parsed()) check_overrides(forward.overrides);
  if (eval_cmd->parsed()) {
    cli::parse_depths(eval.depths);
    check_overrides(cli::eval_overrides(eval));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  std::vector<std::string> args;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::string line;
  while (std::getline(in, line)) args.push_back(line);
  if (args.size() > 64) return 0;
  try {
    parse_and_check(args);
  } catch (const CLI::Error&) {  // ParseError, or Success for --help
  } catch (const UserError&) {
  }
  return 0;
}
