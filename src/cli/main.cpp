// Entry point of the `roformer` binary; the command line itself is cli/run_cli.cpp.
#include "cli/run_cli.h"

int main(int argc, char** argv) {
  return roformer::cli::run_cli(argc, argv);
}
