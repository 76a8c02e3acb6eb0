// `roformer eval CHECKPOINT --lengths 128,256 [--protocol chunks|sliding] [--stride S]
//  [--split valid|test] [--set k=v ...] [--out DIR]`: length-extrapolation evaluation.
#include <iostream>

#include "cli/commands.h"
#include "roformer/common/files.h"
#include "roformer/eval/extrapolation.h"

namespace roformer::cli {

void add_eval_command(CLI::App& app, int& exit_code) {
  struct Options {
    std::string checkpoint, lengths, protocol, split, out;
    int64_t stride = -1;
    std::vector<std::string> overrides;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("eval", "Evaluate a checkpoint at several sequence lengths (extrapolation)");
  cmd->add_option("checkpoint", o->checkpoint, "checkpoint directory (RUN/checkpoints/step_N)")->required();
  cmd->add_option("--lengths", o->lengths, "comma-separated evaluation lengths (default: eval.lengths)");
  cmd->add_option("--protocol", o->protocol, "chunks (non-overlapping) or sliding (window with stride)");
  cmd->add_option("--stride", o->stride, "sliding-window stride (default half the length)");
  cmd->add_option("--split", o->split, "valid or test");
  cmd->add_option("--set", o->overrides, "override a runtime key, e.g. --set model.position.rope.scaling.kind=yarn")
      ->allow_extra_args(false);
  cmd->add_option("--out", o->out, "directory for eval.json and eval.csv (default: print only)");
  cmd->callback([o, &exit_code] {
    std::vector<std::string> overrides = o->overrides;
    if (!o->lengths.empty()) overrides.push_back("eval.lengths=" + o->lengths);
    if (!o->protocol.empty()) overrides.push_back("eval.protocol=" + o->protocol);
    if (o->stride >= 0) overrides.push_back("eval.stride=" + std::to_string(o->stride));
    if (!o->split.empty()) overrides.push_back("eval.split=" + o->split);
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
