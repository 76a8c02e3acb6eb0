// The run lifecycle every training task shares (see run_lifecycle.h).
#include "roformer/run/run_lifecycle.h"

#include <csignal>
#include <optional>
#include <thread>
#include <utility>

#include "roformer/common/build_info.h"
#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/common/log.h"
#include "roformer/config/config_loader.h"
#include "roformer/run/device_setup.h"
#include "roformer/run/mfu.h"
#include "roformer/run/signals.h"
#include "roformer/runtime/device.h"

namespace roformer::run {

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

RunLifecycle::RunLifecycle(const config::Config& config, const dist::DistEnv& env, const std::string& run_dir,
                           std::string what)
    : config_(config), env_(env), run_dir_(run_dir.empty() ? "runs/" + config.name : run_dir), what_(std::move(what)) {}

void RunLifecycle::start_tensorboard() {
  if (rank0() && config_.train.tensorboard) tensorboard_ = std::make_unique<TensorBoardWriter>();
}

void RunLifecycle::claim_run_directory(const std::string& resume) {
  if (rank0()) lock_ = lock_existing_run_directory(run_dir_);  // rank 0 writes it
  check_run_directory(run_dir_, resume, config_.train.tensorboard);
  resume_dir_ = resume_target(run_dir_, resume);
}

// train.threads; on a resume with train.threads=0, the count the resumed run used: LibTorch's CPU
// reductions split their work by the thread count, so only that count continues the
// uninterrupted run's bits, whatever else the machine is running now.
int64_t RunLifecycle::thread_request() const {
  const int64_t requested = config_.train.threads;
  if (requested != 0 || resume_dir_.empty() || config_.train.resume_threads == config::ResumeThreads::free)
    return requested;
  const std::optional<int> used = io::checkpoint_intra_op_threads(resume_dir_);
  if (!used) return requested;  // a checkpoint from before the count was kept
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (*used > cpus) {
    log::warn("the resumed run used ", *used, " intra-op threads and this machine has ", cpus,
              " CPUs; choosing anew, so the resumed steps may differ from an uninterrupted run in the last bits");
    return requested;
  }
  log::info("intra-op threads: ", *used,
            ", the count of the run being resumed, so the resume is bitwise "
            "exact (train.resume_threads=free chooses from the free CPUs instead)");
  return *used;
}

void RunLifecycle::setup_device(const std::string& data_parallel_note) {
  start_tensorboard();
  const config::TrainConfig& t = config_.train;
  const int threads = runtime::apply_threads(thread_request(), env_.local_world_size, /*strict=*/true);
  device_ = runtime::pick_device(t.device, env_.local_rank, /*strict=*/true);
  autocast_ = device_.is_cuda() && t.precision != config::Precision::fp32;
  const std::string switches = apply_cuda_switches(t, device_);
  if (env_.distributed()) {
    log::info("data parallel: ", env_.describe(), ", ", engine_name(pick_engine(config_.dist, device_)),
              data_parallel_note.empty() ? "" : ", " + data_parallel_note);
    group_ = open_process_group(env_, config_.dist, device_);
    resume_dir_ = agree_on_resume(*group_, env_, resume_dir_);
  }
  log::info("device ", device_.str(), device_.is_cuda() ? " (" + device_name(device_) + ")" : "", ", ", threads,
            " intra-op threads, ", autocast_ ? "bf16 autocast" : "fp32", switches.empty() ? "" : ", " + switches);
}

void RunLifecycle::open_run_directory(const std::string& header, int64_t resumed_step) {
  git_rev_ = build_info().git_revision;
  if (!rank0()) return;
  lock_run_directory_for_writing(run_dir_, lock_);
  check_writable(run_dir_);
  log::add_file(run_dir_ + "/train.log");
  const std::string yaml = config::dump_yaml(config_);
  write_file_atomic(run_dir_ + "/config.yaml", "# git revision: " + git_rev_ + "\n" + header + yaml);
  log::debug("resolved config:\n", yaml);  // the log file always; the console with --verbose
  log::info("config ", config::config_summary(config_), "\n  every key: ", run_dir_,
            "/config.yaml (--verbose prints it here)");
  metrics_ = MetricsWriter(run_dir_ + "/metrics.jsonl", resume_dir_.empty() ? -1 : resumed_step);
  if (tensorboard_) metrics_.add_tensorboard(std::move(tensorboard_), run_dir_ + "/tensorboard", resumed_step);
}

void RunLifecycle::begin_steps() {
  install_stop_handlers();
  watch_ = std::make_unique<NonFiniteWatch>(device_);
}

bool RunLifecycle::stopping(const StepResult& r) const {
  return group_ ? r.any_stop : stop_requested();
}

// Those steps changed nothing (the optimizer skipped them on the device).
bool RunLifecycle::stop_on_nonfinite() {
  const NonFiniteWatch::Seen seen = watch_->read();
  if (seen.count == reported_nonfinite_) return false;
  if (reported_nonfinite_ == 0)
    log::error("non-finite ", seen.first_was_loss ? "loss" : "gradient norm", " at step ", seen.first_step,
               "; that update was skipped");
  if (seen.count > 1) log::error(seen.count, " non-finite steps so far");
  skipped_ += seen.count - reported_nonfinite_;
  reported_nonfinite_ = seen.count;
  if (config_.train.on_nonfinite == config::NonFinitePolicy::skip) return false;
  log::error("stopping; the last good checkpoint is intact (train.on_nonfinite=skip skips such batches)");
  return true;
}

void RunLifecycle::save_checkpoint(torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                                   const io::TrainerState& state, const io::CheckpointFaults& faults) {
  if (rank0())
    save_checkpoint_or_explain(what_, run_dir_, model, optimizer, state, config_, git_rev_,
                               config_.train.keep_checkpoints, faults);
  if (group_) group_->store_barrier("checkpoint");  // nobody runs ahead of a checkpoint being written
}

int RunLifecycle::stopped(int64_t step) const {
  const int sig = stop_signal() ? stop_signal() : SIGTERM;  // a peer's signal stops this rank too
  log::warn("stopped by signal ", sig, " after step ", step, "; checkpoint saved; continue with --resume auto");
  return 128 + sig;
}

RunEnd RunLifecycle::finish(int exit_code, int64_t steps) {
  if (skipped_ && exit_code == 0) log::warn(skipped_, " batches skipped for non-finite values");
  log::close_file();
  return {exit_code, steps, run_dir_};
}

}  // namespace roformer::run
