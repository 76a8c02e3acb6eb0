// The distributed environment of this process, read from torchrun's variables (RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) or, when those are
// unset, from Slurm's (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, ...). Nothing set means a
// single process. Every value is validated; a bad one is a UserError naming the variable.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace roformer::dist {

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string source = "single process";  // "torchrun variables", "Slurm variables"
  // Under torchrun the agent already hosts the TCP store at MASTER_ADDR:MASTER_PORT
  // (TORCHELASTIC_USE_AGENT_STORE=True): every rank, rank 0 included, connects as a client.
  bool agent_store = false;
  int restart_count = 0;  // TORCHELASTIC_RESTART_COUNT: keys of earlier attempts are ignored

  bool distributed() const { return world_size > 1; }
  std::string describe() const;
};

// Reads variables through `getenv` (tests pass a map); throws UserError on bad values.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
DistEnv read_dist_env(const EnvLookup& getenv);

// The process environment.
DistEnv read_dist_env();

}  // namespace roformer::dist
