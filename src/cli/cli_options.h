// The `roformer` command line without LibTorch: each subcommand's options and their checks,
// declared here and given callbacks by cmd_*.cpp, so the fuzzing target fuzz_cli_args parses
// exactly the options the binary parses. A value that cannot be right (an empty path, a
// negative stride, a NaN depth) is refused at parse time with exit 2, never read as "not given".
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace roformer::cli {

struct TrainArgs {
  std::string file, run_dir, resume, init_from;
  std::vector<std::string> overrides;
  bool verbose = false;  // log_level=debug: the resolved config (and debug lines) on the console
};

struct FinetuneArgs {
  std::string checkpoint, task, run_dir, resume;
  std::vector<std::string> overrides;
  bool verbose = false;
};

struct EvalArgs {
  std::string checkpoint, lengths, protocol, split, out;
  int64_t stride = -1;
  std::vector<std::string> overrides;
  bool passkey = false;
  std::string prompts;  // --prompts FILE: prompts in the model's tokens (make_ruler_prompts.py)
  bool per_token = false;
  bool fit_temperature = false;
  std::string depths = "0,0.25,0.5,0.75,1";
  int64_t trials = 5;
};

struct SweepArgs {
  std::string file, out, record;
  std::vector<std::string> overrides;  // --set: after the file's own set, before each variant's
  int64_t seeds = 0;                   // 0: not given (the file's list)
  bool report_only = false;
};

struct ConfigCheckArgs {
  std::string file;
  std::vector<std::string> overrides;
  int64_t length = 0;     // `config rope`: the pass length (0: the training length)
  std::string queries;    // `config rope --queries`: JSON lines, one query each
  bool markdown = false;  // `config schema --markdown`
};

struct ConvertArgs {
  std::string from, to;
};

struct ForwardArgs {
  std::string checkpoint, input_ids, attention_mask, token_type_ids, output;
  std::vector<std::string> overrides;
};

CLI::App* declare_train(CLI::App& app, TrainArgs& a);
CLI::App* declare_finetune(CLI::App& app, FinetuneArgs& a);
CLI::App* declare_eval(CLI::App& app, EvalArgs& a);
CLI::App* declare_sweep(CLI::App& app, SweepArgs& a);
// `config check`, `config schema`, `config rope` and `config layers`.
struct ConfigCommands {
  CLI::App *check, *schema, *rope, *layers;
};
ConfigCommands declare_config(CLI::App& app, ConfigCheckArgs& a);
// `convert hf-to-native` and `convert native-to-hf`; returns them in that order.
std::pair<CLI::App*, CLI::App*> declare_convert(CLI::App& app, ConvertArgs& a);
CLI::App* declare_forward(CLI::App& app, ForwardArgs& a);

// The runtime overrides eval's flags stand for (--lengths -> eval.lengths=..., ...), after --set.
std::vector<std::string> eval_overrides(const EvalArgs& a);

// --depths "0,0.5,1" -> {0, 0.5, 1}; UserError for an entry that is not a number in [0, 1].
std::vector<double> parse_depths(const std::string& text);

// The message for a first word that is not a command (with the closest one), or "" if it is.
std::string unknown_command_message(CLI::App& app, const std::string& word);

}  // namespace roformer::cli
