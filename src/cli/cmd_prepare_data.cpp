// `roformer prepare-data ...`: runs the roformer-prepare-data tool that sits next to this
// binary (tokenization lives in its own process; see src/tools/prepare_data_main.cpp),
// passing every argument through.
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cli/commands.h"
#include "roformer/common/errors.h"
#include "roformer/common/files.h"

namespace roformer::cli {
void add_prepare_data_command(CLI::App& app, int& /*exit_code: execv replaces the process*/) {
  CLI::App* cmd = app.add_subcommand(
      "prepare-data", "Tokenize text into binary shards + meta.json (byte or SentencePiece); see --help");
  cmd->prefix_command();  // everything after the subcommand goes to the tool
  cmd->set_help_flag();   // ... including --help
  cmd->allow_extras();
  cmd->fallthrough(false);
  cmd->callback([cmd] {
    const std::string tool = sibling_executable("roformer-prepare-data");
    if (::access(tool.c_str(), X_OK) != 0)
      throw UserError("'" + tool + "' is missing: rebuild the project (it is built with the roformer binary)");
    std::vector<std::string> args{tool};
    for (const auto& a : cmd->remaining()) args.push_back(a);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(tool.c_str(), argv.data());
    throw std::runtime_error("cannot run '" + tool + "': " + std::strerror(errno));  // execv returned: it failed
  });
}

}  // namespace roformer::cli
