// `roformer sweep ABLATION.yaml [--seeds N] [--set k=v ...] [--out DIR] [--record DIR] [--report-only]`.
#include <filesystem>

#include "cli/cli_options.h"
#include "cli/commands.h"
#include "roformer/common/log.h"
#include "roformer/sweep/sweep.h"

namespace roformer::cli {

void add_sweep_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SweepArgs>();
  CLI::App* cmd = declare_sweep(app, *o);
  cmd->callback([o, &exit_code] {
    const sweep::SweepSpec spec = sweep::load_sweep(o->file, o->overrides);
    const std::string out = o->out.empty() ? "sweeps/" + spec.name : o->out;
    if (o->report_only) {
      sweep::write_sweep_report(spec, out);
      exit_code = 0;
      return;
    }
    exit_code = sweep::run_sweep(spec, out, o->seeds, o->record);
  });
}

}  // namespace roformer::cli
