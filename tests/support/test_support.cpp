// Implementation of the shared test helpers (temp dirs, files, subprocesses).
#include "test_support.h"

#include <sys/wait.h>

#include <array>
#include <random>
#include <vector>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace roformer::testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base ? base : "/tmp") + "/roformer_test_XXXXXX";
  if (!mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
  path_ = templ;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << text;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed: " + command);
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) result.output.append(buf.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::string make_word_dataset(const TempDir& dir, size_t chars) {
  std::mt19937 rng(1);
  const std::vector<std::string> words{"the ", "kernel ", "maps ", "a ", "page ", "into ", "memory ", "and ", "frees ", "it. "};
  std::string text;
  while (text.size() < chars) text += words[rng() % words.size()];
  write_file(dir.file("train.txt"), text);
  write_file(dir.file("valid.txt"), text.substr(0, chars / 10));
  const auto r = run_command("'" + roformer_binary() + "' prepare-data --input '" + dir.file("train.txt") + "' '" +
                             dir.file("valid.txt") + "' --out '" + dir.file("ds") + "'");
  if (r.exit_code != 0) throw std::runtime_error("prepare-data failed: " + r.output);
  return dir.file("ds");
}

std::string write_tiny_config(const TempDir& dir, const std::string& dataset, const std::string& objective) {
  const std::string path = dir.file("tiny.yaml");
  write_file(path, "name: tiny\nmodel:\n  objective: " + objective +
                       "\n  hidden_size: 32\n  num_layers: 1\n  num_heads: 2\n  ffn_size: 64\n"
                       "  hidden_dropout: 0.1\n  attention_dropout: 0.0\ndata:\n  path: " + dataset +
                       "\n  seq_len: 32\ntrain:\n  steps: 40\n  batch_size: 8\n  lr: 3.0e-3\n  warmup_steps: 5\n"
                       "  log_every: 5\n  eval_every: 20\n  eval_batches: 2\n  checkpoint_every: 10\n"
                       "  keep_checkpoints: 100\n  threads: 1\n");
  return path;
}

std::string roformer_binary() { return ROFORMER_BINARY; }
std::string source_dir() { return ROFORMER_SOURCE_DIR; }

}  // namespace roformer::testing
