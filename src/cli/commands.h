// Subcommand registration for the `roformer` CLI: each subcommand lives in its own file and
// adds itself to the CLI11 app; its callback runs the command and stores the exit code.
#pragma once

#include <CLI/CLI.hpp>

namespace roformer::cli {

void add_version_command(CLI::App& app, int& exit_code);
void add_config_command(CLI::App& app, int& exit_code);
void add_prepare_data_command(CLI::App& app, int& exit_code);
void add_train_command(CLI::App& app, int& exit_code);
void add_finetune_command(CLI::App& app, int& exit_code);
void add_eval_command(CLI::App& app, int& exit_code);
void add_sweep_command(CLI::App& app, int& exit_code);
void add_convert_command(CLI::App& app, int& exit_code);
void add_forward_command(CLI::App& app, int& exit_code);

}  // namespace roformer::cli
