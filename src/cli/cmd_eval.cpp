// `roformer eval CHECKPOINT --lengths 128,256 [--protocol chunks|sliding] [--stride S]
//  [--split valid|test] [--set k=v ...] [--out DIR] [--passkey]`: length-extrapolation
// evaluation (perplexity, or passkey retrieval accuracy).
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/common/strings.h"
#include "roformer/data/dataset_meta.h"
#include "roformer/eval/extrapolation.h"
#include "roformer/eval/passkey.h"

namespace roformer::cli {

namespace {

struct EvalOptions {
  std::string checkpoint, lengths, protocol, split, out;
  int64_t stride = -1;
  std::vector<std::string> overrides;
  bool passkey = false;
  std::string depths = "0,0.25,0.5,0.75,1";
  int64_t trials = 5;
};

// Passkey accuracy by length and depth: a table, and passkey.json with --out.
void run_passkey(const EvalOptions& o, const std::vector<std::string>& overrides) {
  eval::LoadedCheckpoint c = eval::load_for_eval(o.checkpoint, overrides);
  const data::DatasetMeta meta = data::read_dataset_meta(c.config.data.path);
  if (meta.tokenizer != "byte")
    throw UserError("passkey prompts are built from bytes; this checkpoint's dataset uses the " + meta.tokenizer +
                    " tokenizer");
  std::vector<double> depths;
  for (const std::string& d : split(o.depths, ',')) {
    try {
      depths.push_back(std::stod(d));
    } catch (const std::exception&) {
      throw UserError("--depths: '" + d + "' is not a number");
    }
    if (depths.back() < 0 || depths.back() > 1) throw UserError("--depths: " + d + " is outside [0, 1]");
  }
  const int64_t limit = c.model->position_encoding().max_length();
  std::vector<int64_t> lengths;
  for (int64_t L : c.config.eval.lengths) {
    if (limit > 0 && L + 5 > limit) {
      std::cout << "length " << L << ": n/a (learned positions stop at " << limit << ")\n";
      continue;
    }
    lengths.push_back(L);
  }
  const auto cells = eval::passkey_accuracy(c.model, lengths, depths, o.trials, 17, c.device);
  nlohmann::json j = {{"checkpoint", o.checkpoint}, {"trials", o.trials}, {"cells", nlohmann::json::array()}};
  std::cout << "passkey accuracy (" << o.trials << " prompts per cell)\n  length";
  for (double d : depths) std::cout << "  depth " << d;
  std::cout << "\n";
  for (int64_t L : lengths) {
    std::cout << std::setw(8) << L;
    for (const auto& cell : cells)
      if (cell.length == L) {
        std::cout << std::setw(10) << static_cast<double>(cell.correct) / static_cast<double>(cell.trials);
        j["cells"].push_back(
            {{"length", cell.length}, {"depth", cell.depth}, {"trials", cell.trials}, {"correct", cell.correct}});
      }
    std::cout << "\n";
  }
  if (!o.out.empty()) {
    make_directories(o.out);
    write_file_atomic(o.out + "/passkey.json", j.dump(2) + "\n");
    std::cout << "wrote " << o.out << "/passkey.json\n";
  }
}

}  // namespace

void add_eval_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<EvalOptions>();
  CLI::App* cmd = app.add_subcommand("eval", "Evaluate a checkpoint at several sequence lengths (extrapolation)");
  cmd->add_option("checkpoint", o->checkpoint, "checkpoint directory (RUN/checkpoints/step_N)")->required();
  cmd->add_option("--lengths", o->lengths, "comma-separated evaluation lengths (default: eval.lengths)");
  cmd->add_option("--protocol", o->protocol, "chunks (non-overlapping) or sliding (window with stride)");
  cmd->add_option("--stride", o->stride, "sliding-window stride (default half the length)");
  cmd->add_option("--split", o->split, "valid or test");
  cmd->add_option("--set", o->overrides, "override a runtime key, e.g. --set model.position.rope.scaling.kind=yarn")
      ->allow_extra_args(false);
  cmd->add_option("--out", o->out, "directory for eval.json and eval.csv (default: print only)");
  cmd->add_flag("--passkey", o->passkey, "passkey retrieval instead of perplexity (causal LM, byte datasets)");
  cmd->add_option("--depths", o->depths, "passkey depths in [0, 1], comma-separated")->capture_default_str();
  cmd->add_option("--trials", o->trials, "passkey prompts per (length, depth)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->callback([o, &exit_code] {
    std::vector<std::string> overrides = o->overrides;
    if (!o->lengths.empty()) overrides.push_back("eval.lengths=" + o->lengths);
    if (!o->protocol.empty()) overrides.push_back("eval.protocol=" + o->protocol);
    if (o->stride >= 0) overrides.push_back("eval.stride=" + std::to_string(o->stride));
    if (!o->split.empty()) overrides.push_back("eval.split=" + o->split);
    if (o->passkey) {
      run_passkey(*o, overrides);
      exit_code = 0;
      return;
    }
    const eval::ExtrapolationReport report = eval::evaluate_checkpoint(o->checkpoint, overrides);
    std::cout << eval::report_table(report);
    if (!o->out.empty()) {
      make_directories(o->out);
      write_file_atomic(o->out + "/eval.json", eval::report_json(report));
      write_file_atomic(o->out + "/eval.csv", eval::report_csv(report));
      std::cout << "wrote " << o->out << "/eval.json and eval.csv\n";
    }
    exit_code = 0;
  });
}

}  // namespace roformer::cli
