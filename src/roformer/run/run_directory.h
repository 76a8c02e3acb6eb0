// The run directory a training or fine-tuning run writes (config.yaml, train.log,
// metrics.jsonl, checkpoints/), checked before anything is written: it is empty or one of our
// runs (never a checkpoint or a folder of the user's), what exists has the kind the run
// writes, it is writable, checkpoints that are all incomplete are never silently restarted
// over, and one process at a time owns it (RunDirectoryLock).
#pragma once

#include <string>

namespace roformer::run {

// An exclusive lock on a run directory: flock on RUN/.lock (an empty file, left in place),
// held until the object dies or the process exits in any way (kill -9 included: the kernel
// drops it). A second train or finetune on the same directory stops with a UserError instead
// of interleaving its writes with the first's.
class RunDirectoryLock {
 public:
  RunDirectoryLock() = default;
  ~RunDirectoryLock();
  RunDirectoryLock(RunDirectoryLock&& other) noexcept;
  RunDirectoryLock& operator=(RunDirectoryLock&& other) noexcept;
  RunDirectoryLock(const RunDirectoryLock&) = delete;
  RunDirectoryLock& operator=(const RunDirectoryLock&) = delete;

  // Locks `run_dir`, which must exist; throws UserError when another process holds it. Without
  // `create`, a directory with no lock file yet gives an empty (not held) lock.
  static RunDirectoryLock acquire(const std::string& run_dir, bool create);
  bool held() const { return fd_ >= 0; }

 private:
  friend RunDirectoryLock lock_existing_run_directory(const std::string& run_dir);
  friend void lock_run_directory_for_writing(const std::string& run_dir, RunDirectoryLock& lock);
  explicit RunDirectoryLock(int fd) : fd_(fd) {}
  int fd_ = -1;
  bool was_empty_ = false;  // the directory was absent or empty when the inputs were checked
};

// Fails (UserError) before any training if `dir` cannot be created or written.
void check_writable(const std::string& dir);

// `resume` is the --resume argument ("", "auto" or a checkpoint directory). Call it with the
// directory locked where it exists (lock_existing_run_directory), so what it sees stays true.
// With `tensorboard`, RUN/tensorboard must be a writable directory where it exists.
void check_run_directory(const std::string& run_dir, const std::string& resume, bool tensorboard);

// Before the inputs are checked, creating nothing: locks an existing directory that has its lock
// file (every run leaves one); else an empty lock that remembers whether the directory was
// empty. check_run_directory then decides whether the directory may be used.
RunDirectoryLock lock_existing_run_directory(const std::string& run_dir);

// When the run first writes: creates `run_dir` and takes its lock unless `lock` holds it
// already. A directory that was empty at the checks but has files now (another process started
// there in between) is refused.
void lock_run_directory_for_writing(const std::string& run_dir, RunDirectoryLock& lock);

// The checkpoint to continue from: --resume auto takes the newest complete one (or none),
// a path is taken as given (checked complete); without --resume a directory that already has
// checkpoints is refused. Returns "" to start fresh.
std::string resume_target(const std::string& run_dir, const std::string& resume);

}  // namespace roformer::run
