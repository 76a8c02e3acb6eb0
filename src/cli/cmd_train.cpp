// `roformer train CONFIG [--set k=v ...] [--run-dir DIR] [--resume auto|PATH] [--init-from DIR]`. Under a
// launcher (scripts/launch.sh, torchrun --no-python, srun) the rank comes from the environment.
#include <algorithm>
#include <optional>

#include "cli/cli_options.h"
#include "cli/commands.h"
#include "cli/hf_folder.h"
#include "roformer/common/errors.h"
#include "roformer/common/log.h"
#include "roformer/config/config_loader.h"
#include "roformer/distributed/dist_env.h"
#include "roformer/io/checkpoint.h"
#include "roformer/train/init_from.h"
#include "roformer/train/trainer.h"

namespace roformer::cli {

void add_train_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<TrainArgs>();
  CLI::App* cmd = declare_train(app, *o);
  cmd->callback([o, &exit_code] {
    if (!o->init_from.empty() && !o->resume.empty())
      throw UserError(
          "--init-from starts a new run from another run's weights and --resume continues this run; "
          "give one of them");
    config::LoadedConfig loaded = config::load_config(o->file, o->overrides);
    if (!o->init_from.empty()) {
      loaded.config.train.init_from = o->init_from;
      loaded.origins["train.init_from"] = "--init-from";
    }
    train::TrainOptions opts;
    // train.init_from may name a Hugging Face folder (converted for this run, removed when it
    // ends); its model, or a checkpoint's, fills the model keys the config leaves unset.
    std::optional<CheckpointOrHfFolder> source;
    if (const std::string init = loaded.config.train.init_from; !init.empty()) {
      source.emplace(init, "train");
      const train::InitSource resolved = train::resolve_init_source(source->path());
      train::inherit_model(loaded, io::checkpoint_config(resolved.dir),
                           o->init_from.empty() ? "train.init_from " + init : "--init-from " + init);
      if (source->converted()) opts.init_weights = source->path();
    }
    opts.env = dist::read_dist_env();
    log::init_for_rank(o->verbose ? "debug" : loaded.config.log_level, opts.env.rank, opts.env.world_size);
    opts.run_dir = o->run_dir;
    opts.resume = o->resume;
    opts.faults = train::FaultInjection::from_environment();
    exit_code = train::run_training(loaded, opts).exit_code;
  });
}

}  // namespace roformer::cli
