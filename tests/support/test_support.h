// Helpers shared by the tests: temporary directories, file writing, and running the
// `roformer` binary (or any command) as a process with its exit code and output captured.
#pragma once

#include <string>

namespace roformer::testing {

// A fresh directory under $TMPDIR, removed with its contents when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void write_file(const std::string& path, const std::string& text);
std::string read_file(const std::string& path);

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `command` through /bin/sh with stderr merged into stdout.
CommandResult run_command(const std::string& command);

// Prepares a byte dataset at dir/ds from generated word text (train: `chars` characters,
// valid: a tenth of it) with `roformer prepare-data`; returns its path.
std::string make_word_dataset(const TempDir& dir, size_t chars = 40000);

// Writes dir/tiny.yaml: a one-layer width-32 model on `dataset`, sequence 32, batch 8,
// 40 steps, checkpoints every 10; returns its path.
std::string write_tiny_config(const TempDir& dir, const std::string& dataset, const std::string& objective = "mlm");

// Absolute path of the built `roformer` binary and of the source tree (set by CMake).
std::string roformer_binary();
std::string source_dir();

}  // namespace roformer::testing
