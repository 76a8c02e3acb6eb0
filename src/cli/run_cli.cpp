// What the `roformer` binary does (cli/main.cpp calls it): builds the CLI11 app from the
// subcommand files and maps failures to exit codes (2: user error with a message naming the fix;
// 1: internal). The bad-input suite's fork server links the same objects and calls it too.
#include <ATen/Context.h>

#include <csignal>
#include <cstdint>
#include <iostream>

#include "cli/cli_options.h"
#include "cli/commands.h"
#include "cli/run_cli.h"
#include "roformer/common/errors.h"
#include "roformer/common/host_memory.h"
#include "roformer/common/large_block_cache.h"
#include "roformer/common/log.h"
#include "roformer/common/strings.h"
#include "roformer/ops/common/cpu_vectors.h"

int roformer::cli::run_cli(int argc, char** argv) {
  using namespace roformer;
  // A file-size limit (ulimit -f) should fail a write with EFBIG, reported like a full disk,
  // rather than kill the process.
  std::signal(SIGXFSZ, SIG_IGN);
  // Tables go to stdout, progress and logs to stderr: stdout is flushed at every write, so a log
  // file that takes both (`> run.log 2>&1`) has each table where it was printed, not at the end.
  std::cout.setf(std::ios::unitbuf);
  CLI::App app{
      "roformer: train and evaluate transformer encoders with rotary (RoFormer) and other position\n"
      "encodings on LibTorch. Run `roformer COMMAND --help` for a command's options."};
  app.require_subcommand(1);
  app.fallthrough();
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "console log level: trace, debug, info, warn, error, off")
      ->capture_default_str();
  app.parse_complete_callback([&log_level] {
    log::init(log::parse_level(log_level));
    tune_host_allocator();        // before a command's first tensor: activations reuse warm heap pages
    install_large_block_cache();  // and blocks of 32 MiB or more, which glibc maps afresh each time
    // Subnormal floats flushed to zero, on this thread and the pools it starts: a softmax over
    // strongly biased scores (FoX's decay, ALiBi far from the query) makes many weights subnormal,
    // and MKL's products over them ran several times slower (docs/performance.md).
    at::globalContext().setFlushDenormal(true);
    roformer::ops::cpu_vector_bytes();  // ROFORMER_CPU_VECTOR_BYTES checked before any command starts
  });

  int exit_code = 0;
  cli::add_version_command(app, exit_code);
  cli::add_config_command(app, exit_code);
  cli::add_prepare_data_command(app, exit_code);
  cli::add_train_command(app, exit_code);
  cli::add_finetune_command(app, exit_code);
  cli::add_eval_command(app, exit_code);
  cli::add_sweep_command(app, exit_code);
  cli::add_convert_command(app, exit_code);
  cli::add_forward_command(app, exit_code);

  // An unknown command word: name it and suggest the closest command (CLI11 alone would only
  // say that a subcommand is required).
  if (argc > 1 && argv[1][0] != '-') {
    const std::string unknown = cli::unknown_command_message(app, argv[1]);
    if (!unknown.empty()) {
      std::cerr << "error: " << unknown << "\n";
      return kUserErrorExitCode;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kUserErrorExitCode;
  } catch (const UserError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kUserErrorExitCode;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 1;
  }
  return exit_code;
}
