// Run-directory checks shared by `roformer train` and `roformer finetune` (see run_directory.h).
#include "roformer/train/run_directory.h"

#include <unistd.h>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/io/checkpoint.h"

namespace roformer::train {

void check_writable(const std::string& dir) {
  make_directories(dir);
  const std::string probe = dir + "/.write_probe." + std::to_string(::getpid());
  write_file_atomic(probe, "ok");
  ::unlink(probe.c_str());
}

void check_run_directory(const std::string& run_dir, const std::string& resume) {
  if (!path_exists(run_dir)) return;
  if (!is_directory(run_dir))
    throw UserError("--run-dir '" + run_dir + "' exists and is not a directory; name a directory");
  const std::string ckpts = run_dir + "/checkpoints";
  if (path_exists(ckpts) && !is_directory(ckpts))
    throw UserError("'" + ckpts + "' exists and is not a directory, so no checkpoint can be saved; move it away " +
                    "or use another --run-dir");
  for (const char* f : {"metrics.jsonl", "train.log", "config.yaml"}) {
    const std::string path = run_dir + "/" + f;
    if (path_exists(path) && !is_regular_file(path))
      throw UserError("'" + path + "' exists and is not a regular file; move it away or use another --run-dir");
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

}  // namespace roformer::train
