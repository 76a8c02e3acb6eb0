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

// Absolute path of the built `roformer` binary and of the source tree (set by CMake).
std::string roformer_binary();
std::string source_dir();

}  // namespace roformer::testing
