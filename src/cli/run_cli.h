// The `roformer` command line as a function: main() of the binary, and of the bad-input suite's
// fork server (tests/support/fork_server.cpp), which runs it in processes forked per case.
#pragma once

namespace roformer::cli {

// Parses argv, runs the subcommand, returns the process's exit code (0, 2 user error, 1 our bug).
int run_cli(int argc, char** argv);

}  // namespace roformer::cli
