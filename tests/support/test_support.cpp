// Implementation of the shared test helpers (temp dirs, files, subprocesses).
#include "test_support.h"

#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

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

CommandResult run_command(const std::string& command, int deadline_s) {
  CommandResult result;
  std::string quoted;  // the command as one single-quoted sh word
  for (char c : command) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  // GNU timeout runs the command in its own process group and signals all of it.
  const std::string wrapped = "timeout -k 10 " + std::to_string(deadline_s) + " /bin/sh -c '" + quoted + "' 2>&1";
  FILE* pipe = popen(wrapped.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed: " + command);
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) result.output.append(buf.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (result.exit_code == 124)
    result.output += "\n[run_command: killed after the " + std::to_string(deadline_s) + " s deadline]\n";
  return result;
}

namespace {

struct TensorBytes {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

// The tensors of a safetensors file by name (a plain parse: 8-byte header length, JSON, data).
std::map<std::string, TensorBytes> read_safetensors_bytes(const std::string& path) {
  const std::string file = read_file(path);
  if (file.size() < 8) throw std::runtime_error(path + ": too short for safetensors");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(file[static_cast<size_t>(i)]);
  const auto header = nlohmann::json::parse(file.substr(8, n));
  std::map<std::string, TensorBytes> out;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") continue;
    const auto begin = e["data_offsets"][0].get<size_t>(), end = e["data_offsets"][1].get<size_t>();
    out[name] = {e["dtype"].get<std::string>(), e["shape"].get<std::vector<int64_t>>(),
                 file.substr(8 + n + begin, end - begin)};
  }
  return out;
}

double element(const TensorBytes& t, size_t i) {
  if (t.dtype == "F32") {
    float v;
    std::memcpy(&v, t.bytes.data() + 4 * i, 4);
    return v;
  }
  if (t.dtype == "F64") {
    double v;
    std::memcpy(&v, t.bytes.data() + 8 * i, 8);
    return v;
  }
  return std::nan("");  // other dtypes: counted, not measured
}

size_t element_size(const std::string& dtype) {
  return dtype == "F64" || dtype == "I64" ? 8 : dtype == "F32" ? 4 : 2;
}

}  // namespace

std::string safetensors_difference(const std::string& path_a, const std::string& path_b) {
  const auto a = read_safetensors_bytes(path_a), b = read_safetensors_bytes(path_b);
  for (const auto& [name, ta] : a) {
    const auto it = b.find(name);
    if (it == b.end()) return "tensor '" + name + "' is only in " + path_a;
    const TensorBytes& tb = it->second;
    if (ta.dtype != tb.dtype || ta.shape != tb.shape) return "tensor '" + name + "' differs in dtype or shape";
    if (ta.bytes == tb.bytes) continue;
    const size_t size = element_size(ta.dtype), count = ta.bytes.size() / size;
    size_t differing = 0;
    double max_abs = 0;
    for (size_t i = 0; i < count; ++i) {
      if (std::memcmp(ta.bytes.data() + i * size, tb.bytes.data() + i * size, size) == 0) continue;
      ++differing;
      max_abs = std::max(max_abs, std::fabs(element(ta, i) - element(tb, i)));
    }
    std::ostringstream msg;
    msg << "first differing tensor '" << name << "' (" << ta.dtype << ", " << count << " elements): " << differing
        << " elements differ, max abs difference " << max_abs;
    return msg.str();
  }
  if (a.size() != b.size()) return path_b + " has tensors that " + path_a + " lacks";
  return "";
}

std::vector<nlohmann::json> metric_records(const std::string& run, const std::string& type) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_file(run + "/metrics.jsonl"));
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && nlohmann::json::parse(line)["type"] == type) out.push_back(nlohmann::json::parse(line));
  return out;
}

std::string metrics_trajectory(const std::string& run) {
  std::string s;
  for (const auto& r : metric_records(run, "train"))
    s += r["step"].dump() + " " + r["loss"].dump() + " " + r["lr"].dump() + " " + r["grad_norm"].dump() + "\n";
  for (const auto& r : metric_records(run, "eval")) s += "eval " + r["step"].dump() + " " + r["loss"].dump() + "\n";
  return s;
}

std::string checkpoint_weights(const std::string& run_dir, int step) {
  return run_dir + "/checkpoints/step_" + std::to_string(step) + "/model.safetensors";
}

std::string make_word_dataset(const TempDir& dir, size_t chars) {
  std::mt19937 rng(1);
  const std::vector<std::string> words{"the ",  "kernel ", "maps ", "a ",     "page ",
                                       "into ", "memory ", "and ",  "frees ", "it. "};
  std::string text;
  while (text.size() < chars) text += words[rng() % words.size()];
  write_file(dir.file("train.txt"), text);
  write_file(dir.file("valid.txt"), text.substr(0, chars / 10));
  const auto r = run_command("'" + roformer_binary() + "' prepare-data --input '" + dir.file("train.txt") + "' '" +
                             dir.file("valid.txt") + "' --out '" + dir.file("ds") + "'");
  if (r.exit_code != 0) throw std::runtime_error("prepare-data failed: " + r.output);
  return dir.file("ds");
}

std::string make_document_dataset(const TempDir& dir) {
  std::string text, word;
  std::istringstream words(read_file(dir.file("train.txt")));
  for (int n = 0; words >> word; ++n) text += word + (n % 23 == 22 ? "\n<doc>\n" : " ");
  const auto made = run_command("mkdir -p '" + dir.file("documents") + "'");
  if (made.exit_code != 0) throw std::runtime_error("mkdir failed: " + made.output);
  write_file(dir.file("documents/train.txt"), text);
  const auto r =
      run_command("'" + roformer_binary() + "' prepare-data --input '" + dir.file("documents/train.txt") + "' '" +
                  dir.file("valid.txt") + "' --out '" + dir.file("docs") + "' --document-separator '<doc>'");
  if (r.exit_code != 0) throw std::runtime_error("prepare-data --document-separator failed: " + r.output);
  return dir.file("docs");
}

std::string write_tiny_config(const TempDir& dir, const std::string& dataset, const std::string& objective) {
  const std::string path = dir.file("tiny.yaml");
  write_file(path, "name: tiny\ndist:\n  backend: gloo\nmodel:\n  objective: " + objective +
                       "\n  hidden_size: 32\n  num_layers: 1\n  num_heads: 2\n  ffn_size: 64\n"
                       "  hidden_dropout: 0.1\n  attention_dropout: 0.0\ndata:\n  path: " +
                       dataset +
                       "\n  seq_len: 32\ntrain:\n  steps: 40\n  batch_size: 8\n  lr: 3.0e-3\n  warmup_steps: 5\n"
                       "  log_every: 5\n  eval_every: 20\n  eval_batches: 2\n  checkpoint_every: 10\n"
                       "  keep_checkpoints: 100\n  threads: 1\n  device: cpu\n");
  return path;
}

namespace {

// Triplets whose closer passage shares A's vocabulary (one of four disjoint word sets).
void write_triplets(const std::string& path, int n, uint32_t seed) {
  const std::vector<std::vector<std::string>> topics{{"kernel", "module", "driver", "probe", "irq"},
                                                     {"memory", "page", "slab", "cache", "zone"},
                                                     {"socket", "packet", "route", "tcp", "link"},
                                                     {"inode", "dentry", "mount", "block", "file"}};
  std::mt19937 rng(seed);
  auto text = [&](size_t topic) {
    std::string s;
    for (int w = 0; w < 12; ++w) s += (s.empty() ? "" : " ") + topics[topic][rng() % 5];
    return s;
  };
  std::ofstream out(path);
  for (int i = 0; i < n; ++i) {
    const size_t t = rng() % 4, other = (t + 1 + rng() % 3) % 4;
    const bool b_closer = rng() % 2 == 0;
    const std::string a = text(t), close = text(t), far = text(other);
    out << nlohmann::json{{"A", a},
                          {"B", b_closer ? close : far},
                          {"C", b_closer ? far : close},
                          {"label", b_closer ? "B" : "C"}}
               .dump()
        << "\n";
  }
}

}  // namespace

std::string write_triplet_task(const TempDir& dir, const std::string& encoder) {
  std::filesystem::create_directories(dir.file("tri"));
  write_triplets(dir.file("tri/train.jsonl"), 64, 1);
  write_triplets(dir.file("tri/dev.jsonl"), 32, 2);
  write_triplets(dir.file("tri/test.jsonl"), 32, 3);
  write_file(dir.file("task.yaml"),
             "name: tri\nfinetune:\n  task: triplets\n  data_dir: " + dir.file("tri") +
                 "\n  max_length: 64\n  epochs: 3\n  tokenizer: byte\n  triplet_encoder: " + encoder +
                 "\n  classifier_dropout: 0.1\ntrain:\n  batch_size: 8\n  lr: 1.0e-3\n"
                 "  log_every: 4\n  checkpoint_every: 1000\n  keep_checkpoints: 10\n  threads: 1\n");
  return dir.file("task.yaml");
}

}  // namespace roformer::testing
