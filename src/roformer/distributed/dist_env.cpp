// Parsing and validation of the distributed environment (see dist_env.h).
#include "roformer/distributed/dist_env.h"

#include <cstdlib>

#include "roformer/common/errors.h"

namespace roformer::dist {
namespace {

int parse_int(const std::string& name, const std::string& value, int min, int max) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (value.empty() || used != value.size())
    throw UserError("environment variable " + name + "='" + value + "' is not an integer; unset it or set a number");
  if (v < min || v > max)
    throw UserError("environment variable " + name + "=" + value + " is out of range [" + std::to_string(min) + ", " +
                    std::to_string(max) + "]");
  return static_cast<int>(v);
}

struct Names {
  const char* rank;
  const char* world;
  const char* local_rank;
  const char* local_world;
  const char* source;
};

// RANK/WORLD_SIZE set by hand inside a Slurm job with other values than Slurm's: which one is
// meant cannot be guessed. A launcher (torchrun, scripts/launch.sh: GROUP_RANK or
// TORCHELASTIC_RUN_ID set) runs several ranks per Slurm task, so there the launcher wins.
void check_no_conflict(const EnvLookup& getenv, bool has_torchrun) {
  if (!has_torchrun || getenv("GROUP_RANK") || getenv("TORCHELASTIC_RUN_ID")) return;
  const auto procid = getenv("SLURM_PROCID"), ntasks = getenv("SLURM_NTASKS");
  const auto rank = getenv("RANK"), world = getenv("WORLD_SIZE");
  if (!procid || !ntasks) return;
  if (rank.value_or(*procid) == *procid && world.value_or(*ntasks) == *ntasks) return;
  throw UserError("environment: RANK=" + rank.value_or("(unset)") + " WORLD_SIZE=" + world.value_or("(unset)") +
                  " disagree with Slurm's SLURM_PROCID=" + *procid + " SLURM_NTASKS=" + *ntasks +
                  "; unset RANK and WORLD_SIZE to use Slurm's, or launch through torchrun / scripts/launch.sh");
}

}  // namespace

std::string DistEnv::describe() const {
  if (!distributed()) return "single process";
  return "rank " + std::to_string(rank) + "/" + std::to_string(world_size) + " (local " + std::to_string(local_rank) +
         "/" + std::to_string(local_world_size) + "), rendezvous " + master_addr + ":" + std::to_string(master_port) +
         ", from " + source;
}

DistEnv read_dist_env(const EnvLookup& getenv) {
  const Names torchrun{"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "torchrun variables"};
  const Names slurm{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "Slurm variables"};
  const bool has_torchrun = getenv("RANK") || getenv("WORLD_SIZE");
  const bool has_slurm = !has_torchrun && getenv("SLURM_PROCID") && getenv("SLURM_NTASKS");
  check_no_conflict(getenv, has_torchrun);
  DistEnv env;
  if (!has_torchrun && !has_slurm) return env;
  const Names& n = has_torchrun ? torchrun : slurm;
  env.source = n.source;
  const auto rank = getenv(n.rank);
  const auto world = getenv(n.world);
  if (!rank || !world)
    throw UserError(std::string("environment: ") + (rank ? n.world : n.rank) + " is unset but " +
                    (rank ? n.rank : n.world) + " is set; set both (or neither, for a single process)");
  env.world_size = parse_int(n.world, *world, 1, 1 << 20);
  env.rank = parse_int(n.rank, *rank, 0, env.world_size - 1);
  env.local_world_size = env.world_size;
  env.local_rank = env.rank;
  if (const auto lw = getenv(n.local_world)) {
    // Slurm writes SLURM_NTASKS_PER_NODE as e.g. "8" or "8(x2)": the leading count is enough.
    std::string v = *lw;
    if (has_slurm) v = v.substr(0, v.find('('));
    env.local_world_size = parse_int(n.local_world, v, 1, env.world_size);
  }
  if (const auto lr = getenv(n.local_rank)) {
    env.local_rank = parse_int(n.local_rank, *lr, 0, env.local_world_size - 1);
  } else if (env.local_world_size != env.world_size) {
    throw UserError(std::string("environment: ") + n.local_rank + " is unset but " + n.local_world +
                    " says several nodes; set " + n.local_rank);
  }
  if (const auto addr = getenv("MASTER_ADDR")) {
    if (addr->empty()) throw UserError("environment variable MASTER_ADDR is empty; set the host of rank 0");
    env.master_addr = *addr;
  } else if (env.distributed() && env.local_world_size != env.world_size) {
    throw UserError("environment: MASTER_ADDR is unset for a multi-node run; set it to the host of rank 0");
  }
  if (const auto port = getenv("MASTER_PORT")) env.master_port = parse_int("MASTER_PORT", *port, 1, 65535);
  if (const auto agent = getenv("TORCHELASTIC_USE_AGENT_STORE")) env.agent_store = *agent == "True" || *agent == "1";
  if (const auto restarts = getenv("TORCHELASTIC_RESTART_COUNT"))
    env.restart_count = parse_int("TORCHELASTIC_RESTART_COUNT", *restarts, 0, 1 << 30);
  return env;
}

DistEnv read_dist_env() {
  return read_dist_env([](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  });
}

}  // namespace roformer::dist
