// Resume agreement across ranks and the explained checkpoint save (see run_lifecycle.h).
#include "roformer/train/run_lifecycle.h"

#include "roformer/common/errors.h"
#include "roformer/common/files.h"

namespace roformer::train {

std::string agree_on_resume(dist::ProcessGroup& group, const dist::DistEnv& env, const std::string& resume_dir) {
  const std::string chosen = group.share_from_rank0("resume_dir", resume_dir);
  if (!chosen.empty() && !path_exists(chosen + "/model.safetensors"))
    throw UserError("rank " + std::to_string(env.rank) + " cannot see checkpoint '" + chosen +
                    "' chosen by rank 0; multi-node runs need the run directory on a shared filesystem");
  return chosen;
}

void save_checkpoint_or_explain(const std::string& what, const std::string& run_dir, torch::nn::Module& model,
                                torch::optim::Optimizer& optimizer, const io::TrainerState& state,
                                const config::Config& config, const std::string& git_revision, int64_t keep_last,
                                const io::CheckpointFaults& faults) {
  try {
    io::save_checkpoint(run_dir, model, optimizer, state, config, git_revision, keep_last, faults);
  } catch (const UserError& e) {
    const auto previous = io::latest_checkpoint(run_dir);
    throw UserError(
        std::string(e.what()) + "\n" + what + " stopped at step " + std::to_string(state.step) + "; " +
        (previous ? "the previous checkpoint " + previous->dir + " is intact" : "no checkpoint was written yet") +
        "; free space (or fix permissions) and continue with --resume auto");
  }
}

}  // namespace roformer::train
