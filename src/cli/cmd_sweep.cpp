// `roformer sweep ABLATION.yaml [--seeds N] [--out DIR] [--report-only]`.
#include <filesystem>

#include "cli/commands.h"
#include "roformer/common/log.h"
#include "roformer/sweep/sweep.h"

namespace roformer::cli {

void add_sweep_command(CLI::App& app, int& exit_code) {
  struct Options {
    std::string file, out;
    int64_t seeds = 0;
    bool report_only = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("sweep", "Train and evaluate a grid of configs (ablation) and write one report");
  cmd->add_option("ablation", o->file, "sweep file (configs/ablation/*.yaml)")->required();
  cmd->add_option("--seeds", o->seeds, "number of seeds (overrides the file's list: base seed, base+1, ...)");
  cmd->add_option("--out", o->out, "output directory (default sweeps/<sweep name>); rerunning resumes it");
  cmd->add_flag("--report-only", o->report_only, "only aggregate finished runs into report.md and plots");
  cmd->callback([o, &exit_code] {
    const sweep::SweepSpec spec = sweep::load_sweep(o->file);
    const std::string out = o->out.empty() ? "sweeps/" + spec.name : o->out;
    if (o->report_only) {
      sweep::write_sweep_report(spec, out);
      exit_code = 0;
      return;
    }
    exit_code = sweep::run_sweep(spec, out, o->seeds);
  });
}

}  // namespace roformer::cli
