// `roformer finetune CHECKPOINT TASK.yaml [--set k=v ...] [--run-dir DIR] [--resume auto|PATH]`.
// Under a launcher (scripts/launch.sh, torchrun --no-python) the rank comes from the environment.
#include <algorithm>

#include "cli/cli_options.h"
#include "cli/commands.h"
#include "roformer/common/log.h"
#include "roformer/finetune/finetuner.h"
#include "roformer/io/checkpoint.h"

namespace roformer::cli {

void add_finetune_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<FinetuneArgs>();
  CLI::App* cmd = declare_finetune(app, *o);
  cmd->callback([o, &exit_code] {
    o->checkpoint = io::checkpoint_argument(o->checkpoint, "finetune");
    const config::LoadedConfig loaded = finetune::finetune_config(o->checkpoint, o->task, o->overrides);
    finetune::FinetuneOptions opts;
    opts.env = dist::read_dist_env();
    log::init_for_rank(o->verbose ? "debug" : loaded.config.log_level, opts.env.rank, opts.env.world_size);
    opts.checkpoint = o->checkpoint;
    opts.run_dir = o->run_dir;
    opts.resume = o->resume;
    exit_code = finetune::run_finetune(loaded, opts).exit_code;
  });
}

}  // namespace roformer::cli
