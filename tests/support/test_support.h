// Helpers shared by the tests: temporary directories, file writing, and running the
// `roformer` binary (or any command) as a process with its exit code and output captured.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "roformer/common/errors.h"

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

// Runs `command` through /bin/sh with stderr merged into stdout, under a deadline: past
// `deadline_s` seconds the whole process group gets SIGTERM (SIGKILL 10 s later), the exit
// code is 124 or 137 and the output says so. No test can hang on a child.
constexpr int kDefaultDeadlineSeconds = 300;
CommandResult run_command(const std::string& command, int deadline_s = kDefaultDeadlineSeconds);

// "" when the two safetensors files hold bitwise-identical tensors; otherwise a bounded
// description: the first differing tensor, its dtype and shape, the number of differing
// elements and their largest absolute difference (never the raw bytes).
std::string safetensors_difference(const std::string& path_a, const std::string& path_b);

// The records of RUN/metrics.jsonl whose "type" is `type` ("train" or "eval").
std::vector<nlohmann::json> metric_records(const std::string& run_dir, const std::string& type);

// The deterministic part of a run's metrics (step, loss, lr, grad norm; eval losses), one
// line per record: equal strings mean identical training trajectories.
std::string metrics_trajectory(const std::string& run_dir);

// RUN/checkpoints/step_N/model.safetensors
std::string checkpoint_weights(const std::string& run_dir, int step);

// Prepares a byte dataset at dir/ds from generated word text (train: `chars` characters,
// valid: a tenth of it) with `roformer prepare-data`; returns its path.
std::string make_word_dataset(const TempDir& dir, size_t chars = 40000);
// The word dataset's train.txt (make_word_dataset first) cut into documents of 23 words,
// prepared with --document-separator into DIR/docs (valid.txt as it is); returns that path.
std::string make_document_dataset(const TempDir& dir);

// Writes dir/tiny.yaml: a one-layer width-32 model on `dataset`, sequence 32, batch 8,
// 40 steps, checkpoints every 10, pinned to the CPU (train.device: cpu, dist.backend: gloo:
// these tests check CPU semantics; GPU variants set train.device=cuda); returns its path.
std::string write_tiny_config(const TempDir& dir, const std::string& dataset, const std::string& objective = "mlm");

// Writes dir/tri/{train,dev,test}.jsonl (64/32/32 triplets whose closer passage shares A's
// vocabulary, one of four disjoint word sets) and dir/task.yaml: 3 epochs of batch 8 at
// max_length 64, the byte tokenizer, `encoder` cross or bi, classifier dropout 0.1, a
// checkpoint per epoch (steps 8, 16, 24); returns the task file's path.
std::string write_triplet_task(const TempDir& dir, const std::string& encoder);

// The UserError message f() throws, or "" when it throws none.
template <class F>
std::string user_error(F f) {
  try {
    f();
  } catch (const roformer::UserError& e) {
    return e.what();
  }
  return "";
}

// Absolute paths of the built `roformer` binary, of the source tree, of the data-parallel
// test's worker and of the bad-input suite's fork client (tests/CMakeLists.txt generates them
// into test_paths.cpp).
std::string roformer_binary();
std::string source_dir();
std::string ddp_worker_binary();
std::string fork_client_binary();

}  // namespace roformer::testing
