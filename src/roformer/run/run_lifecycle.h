// The life of a run, written once for every task that trains (pretraining's Trainer, the
// Finetuner): the run directory and its lock, the device and data-parallel setup, the checkpoint
// to resume from and the ranks' agreement on it, metrics.jsonl and TensorBoard, the signals that
// stop a run, the non-finite-step policy, the checkpoint save that explains a full disk, and the
// finish. A task owns one RunLifecycle and adds its parts (data, model, step, evaluation) between
// the phases, in this order:
//   inputs:  claim_run_directory                         (nothing written yet)
//   device:  setup_device                                (TensorBoard writer, threads, device, process group)
//   open:    open_run_directory                          (only now is the directory touched)
//   steps:   begin_steps, then per step record / stopping / stop_on_nonfinite / save_checkpoint
//   end:     stopped (a signal) or finish
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <memory>
#include <string>

#include "roformer/config/config.h"
#include "roformer/distributed/dist_env.h"
#include "roformer/distributed/process_group.h"
#include "roformer/io/checkpoint.h"
#include "roformer/run/metrics.h"
#include "roformer/run/run_directory.h"
#include "roformer/run/run_end.h"
#include "roformer/run/step_result.h"

namespace roformer::run {

// Every rank resumes from rank 0's choice of checkpoint, which must exist on this rank too (a
// multi-node run needs the run directory on a shared filesystem); returns that checkpoint.
std::string agree_on_resume(dist::ProcessGroup& group, const dist::DistEnv& env, const std::string& resume_dir);

// io::save_checkpoint, and on failure (a full disk, no permission) a UserError that adds which
// step stopped, which earlier checkpoint is intact, and how to continue (`what` is "training"
// or "fine-tuning").
void save_checkpoint_or_explain(const std::string& what, const std::string& run_dir, torch::nn::Module& model,
                                torch::optim::Optimizer& optimizer, const io::TrainerState& state,
                                const config::Config& config, const std::string& git_revision, int64_t keep_last,
                                const io::CheckpointFaults& faults = {});

class RunLifecycle {
 public:
  // `config` is the run's resolved config (it must outlive this object: config.yaml and every
  // checkpoint save it); `run_dir` the --run-dir given (empty: runs/NAME); `what` names the task
  // in messages ("training", "fine-tuning").
  RunLifecycle(const config::Config& config, const dist::DistEnv& env, const std::string& run_dir, std::string what);

  // Inputs. Rank 0 locks an existing run directory; every rank checks `--resume` against it and
  // picks the checkpoint it names (empty: a fresh run), read back by resume_dir().
  void claim_run_directory(const std::string& resume);

  // Device. Threads, device, bf16 autocast, CUDA switches; with several ranks the process group
  // and the agreed resume checkpoint. `data_parallel_note` ends the data-parallel log line.
  void setup_device(const std::string& data_parallel_note);

  // Open. Rank 0 takes the directory for writing, logs to RUN/train.log, writes config.yaml
  // (after `header`, comment lines ending in a newline) and opens metrics.jsonl, cut back to the
  // checkpoint's `resumed_step` on a resume.
  void open_run_directory(const std::string& header, int64_t resumed_step);

  // Steps. Installs the stop handlers and the device-side non-finite counter.
  void begin_steps();
  void record(const StepResult& r, int64_t step) { watch_->record(r, step); }
  // Whether to stop after this step: a signal here or (data parallel) on any rank.
  bool stopping(const StepResult& r) const;
  // The one host read of the non-finite counter; logs steps newly gone non-finite (their updates
  // were skipped) and returns true when train.on_nonfinite says to stop the run.
  bool stop_on_nonfinite();
  // Rank 0 saves (explaining a failure), then every rank waits for it.
  void save_checkpoint(torch::nn::Module& model, torch::optim::Optimizer& optimizer, const io::TrainerState& state,
                       const io::CheckpointFaults& faults = {});
  // After a stop request and its checkpoint: logs how to continue, returns the exit code 128 + signal.
  int stopped(int64_t step) const;
  // The end of every run, stopped or not, after `steps` optimizer steps: closes the log file.
  RunEnd finish(int exit_code, int64_t steps);

  bool rank0() const { return env_.rank == 0; }
  const std::string& run_dir() const { return run_dir_; }
  const std::string& resume_dir() const { return resume_dir_; }
  const std::string& git_revision() const { return git_rev_; }
  const torch::Device& device() const { return device_; }
  bool autocast() const { return autocast_; }
  dist::ProcessGroup* group() const { return group_.get(); }
  MetricsWriter& metrics() { return metrics_; }
  int64_t skipped_steps() const { return skipped_; }

 private:
  // With train.tensorboard, rank 0 starts the writer process (after the task's input checks, so
  // a config refused anyway never waits on it), so a broken one is refused before anything is written.
  void start_tensorboard();
  int64_t thread_request() const;

  const config::Config& config_;
  const dist::DistEnv& env_;
  const std::string run_dir_, what_;
  RunDirectoryLock lock_;  // rank 0, for the life of the run
  std::string resume_dir_, git_rev_;
  torch::Device device_{torch::kCPU};
  bool autocast_ = false;
  std::unique_ptr<dist::ProcessGroup> group_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;  // started by start_tensorboard, handed to metrics_
  MetricsWriter metrics_;
  std::unique_ptr<NonFiniteWatch> watch_;
  int64_t reported_nonfinite_ = 0, skipped_ = 0;
};

}  // namespace roformer::run
