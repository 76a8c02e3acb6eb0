// Run-directory checks shared by `roformer train` and `roformer finetune` (see run_directory.h).
#include "roformer/run/run_directory.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/io/checkpoint.h"

namespace roformer::run {
namespace {

constexpr const char* kLockFile = ".lock";

// The names in `dir` that a run did not put there for itself: all but ".", "..", the lock file
// and write probes.
std::vector<std::string> foreign_entries(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == ".." || name == kLockFile || name.rfind(".write_probe.", 0) == 0) continue;
    out.push_back(name);
  }
  ::closedir(d);
  return out;
}

// A directory we may run in: empty, or one a train or finetune run wrote (its log, metrics or
// checkpoints). A checkpoint's own folder and a folder of the user's files are refused.
void check_is_a_run(const std::string& run_dir) {
  const std::vector<std::string> entries = foreign_entries(run_dir);
  if (entries.empty()) return;
  for (const char* mark : {"train.log", "metrics.jsonl", "checkpoints"})
    if (path_exists(run_dir + "/" + mark)) return;
  if (path_exists(run_dir + "/model.safetensors") || path_exists(run_dir + "/trainer.pt"))
    throw UserError("--run-dir '" + run_dir + "' is a checkpoint, not a run directory, and writing a run into it " +
                    "would break it; pass it to --resume (train) or as the checkpoint (finetune), and name a new " +
                    "or empty --run-dir");
  throw UserError("--run-dir '" + run_dir + "' exists and holds files that are not a roformer run (e.g. '" +
                  entries.front() + "'); name a new or empty directory, or a run directory to resume");
}

}  // namespace

RunDirectoryLock::~RunDirectoryLock() {
  if (fd_ >= 0) ::close(fd_);
}

RunDirectoryLock::RunDirectoryLock(RunDirectoryLock&& other) noexcept : fd_(other.fd_), was_empty_(other.was_empty_) {
  other.fd_ = -1;
}

RunDirectoryLock& RunDirectoryLock::operator=(RunDirectoryLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    was_empty_ = other.was_empty_;
    other.fd_ = -1;
  }
  return *this;
}

RunDirectoryLock RunDirectoryLock::acquire(const std::string& run_dir, bool create) {
  const std::string path = run_dir + "/" + kLockFile;
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), 0644);
  if (fd < 0 && !create && errno == ENOENT) return {};
  if (fd < 0)
    throw UserError("cannot open the run directory's lock file '" + path + "': " + std::strerror(errno) +
                    "; check the directory's permissions or use another --run-dir");
  RunDirectoryLock lock(fd);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err != EWOULDBLOCK)
      throw UserError("cannot lock the run directory '" + run_dir + "' (" + std::strerror(err) +
                      "); use a directory on a local filesystem or another --run-dir");
    throw UserError("run directory '" + run_dir + "' is in use by another roformer process (it holds '" + path +
                    "'); wait for that run to finish or stop it, or use another --run-dir");
  }
  return lock;
}

RunDirectoryLock lock_existing_run_directory(const std::string& run_dir) {
  if (!is_directory(run_dir) || foreign_entries(run_dir).empty()) {
    RunDirectoryLock none;
    none.was_empty_ = true;
    return none;
  }
  return RunDirectoryLock::acquire(run_dir, /*create=*/false);  // creates nothing; check_run_directory judges
}

void lock_run_directory_for_writing(const std::string& run_dir, RunDirectoryLock& lock) {
  if (lock.held()) return;
  const bool was_empty = lock.was_empty_;
  make_directories(run_dir);
  lock = RunDirectoryLock::acquire(run_dir, /*create=*/true);
  const std::vector<std::string> entries = foreign_entries(run_dir);
  if (was_empty && !entries.empty())
    throw UserError("run directory '" + run_dir + "' was created by another process while this run was starting " +
                    "(it now holds '" + entries.front() + "'); use another --run-dir, or --resume auto to continue " +
                    "that run once it stops");
}

void check_writable(const std::string& dir) {
  make_directories(dir);
  const std::string probe = dir + "/.write_probe." + std::to_string(::getpid());
  write_file_atomic(probe, "ok");
  ::unlink(probe.c_str());
}

void check_run_directory(const std::string& run_dir, const std::string& resume, bool tensorboard) {
  if (!path_exists(run_dir)) return;
  if (!is_directory(run_dir))
    throw UserError("--run-dir '" + run_dir + "' exists and is not a directory; name a directory");
  const std::string ckpts = run_dir + "/checkpoints";
  if (path_exists(ckpts) && !is_directory(ckpts))
    throw UserError("'" + ckpts + "' exists and is not a directory, so no checkpoint can be saved; move it away " +
                    "or use another --run-dir");
  check_is_a_run(run_dir);
  for (const char* f : {"metrics.jsonl", "train.log", "config.yaml"}) {
    const std::string path = run_dir + "/" + f;
    if (path_exists(path) && !is_regular_file(path))
      throw UserError("'" + path + "' exists and is not a regular file; move it away or use another --run-dir");
  }
  const std::string events = run_dir + "/tensorboard";
  if (tensorboard && path_exists(events)) {
    if (!is_directory(events))
      throw UserError("'" + events + "' exists and is not a directory, so train.tensorboard cannot write its " +
                      "event files there; move it away, or set train.tensorboard=false");
    check_writable(events);
  }
  if (!is_directory(ckpts)) return;
  check_writable(ckpts);
  const std::vector<std::string> started = io::checkpoint_dirs(run_dir);
  if (started.empty() || !io::list_checkpoints(run_dir).empty() || (!resume.empty() && resume != "auto")) return;
  throw UserError("run directory '" + run_dir + "' has only incomplete checkpoints (" + started.front() +
                  (started.size() > 1 ? " and " + std::to_string(started.size() - 1) + " more" : std::string()) +
                  "): nothing to resume from, and starting over would overwrite its metrics; " +
                  "use a new --run-dir, or delete the checkpoints directory to start this run again");
}

std::string resume_target(const std::string& run_dir, const std::string& resume) {
  std::string dir;
  if (resume == "auto") {
    if (auto latest = io::latest_checkpoint(run_dir)) dir = latest->dir;
  } else if (!resume.empty()) {
    dir = resume;
  } else if (!io::checkpoint_dirs(run_dir).empty()) {
    throw UserError("run directory '" + run_dir +
                    "' already has checkpoints; pass --resume auto to continue it or "
                    "--run-dir NEW to start another run");
  }
  if (!dir.empty() && !io::is_complete_checkpoint(dir))
    throw UserError("'" + dir +
                    "' is not a complete checkpoint (missing model.safetensors, trainer.pt, "
                    "config.yaml or meta.json); pass --resume auto to take the newest complete one");
  return dir;
}

}  // namespace roformer::run
