// Sweep records (see sweep_record.h).
#include "roformer/sweep/sweep_record.h"

#include <filesystem>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/config/config_loader.h"

namespace roformer::sweep {
namespace {

// The files of a point that travel: its metrics, resolved config and evaluations.
std::vector<std::string> point_files(const std::vector<std::string>& evals) {
  std::vector<std::string> files{"metrics.jsonl", "config.yaml"};
  files.insert(files.end(), evals.begin(), evals.end());
  return files;
}

void copy_file(const std::string& from, const std::string& to) {
  make_directories(std::filesystem::path(to).parent_path().string());
  write_file_atomic(to, read_text_file(from));
}

}  // namespace

void check_record_dir(const std::string& record_dir) {
  if (path_exists(record_dir) && !is_directory(record_dir))
    throw UserError("--record '" + record_dir + "' exists and is not a directory; name a folder to keep the runs in");
  make_directories(record_dir + "/runs");
  const std::string probe = record_dir + "/runs/.write_probe";
  write_file_atomic(probe, "ok");
  std::filesystem::remove(probe);
}

std::vector<std::string> eval_files(const SweepSpec& s, const SweepVariant& v, const config::Config& c) {
  std::vector<std::string> files;
  for (const auto& p : s.protocols) files.push_back("eval/" + p + ".json");
  if (scaling_applies(s, v, c))
    for (const auto& sc : s.scaling) files.push_back("eval/chunks-" + sc.name + ".json");
  return files;
}

bool point_finished(const std::string& run_dir, const std::vector<std::string>& evals) {
  if (!is_regular_file(run_dir + "/metrics.jsonl")) return false;
  for (const auto& f : evals)
    if (!is_regular_file(run_dir + "/" + f)) return false;
  return true;
}

bool restore_point(const std::string& record_dir, const std::string& name, const std::string& run_dir,
                   const std::vector<std::string>& evals) {
  const std::string from = record_dir + "/runs/" + name;
  if (!point_finished(from, evals) || path_exists(run_dir + "/metrics.jsonl")) return false;
  for (const auto& f : point_files(evals))
    if (is_regular_file(from + "/" + f)) copy_file(from + "/" + f, run_dir + "/" + f);
  return true;
}

void record_point(const std::string& run_dir, const std::string& record_dir, const std::string& name,
                  const std::vector<std::string>& evals) {
  const std::string to = record_dir + "/runs/" + name;
  for (const auto& f : point_files(evals))
    if (is_regular_file(run_dir + "/" + f)) copy_file(run_dir + "/" + f, to + "/" + f);
}

void record_report(const std::string& out_dir, const std::string& record_dir) {
  make_directories(record_dir);
  for (const auto& f : std::filesystem::directory_iterator(out_dir)) {
    const std::string name = f.path().filename().string();
    const std::string ext = f.path().extension().string();
    if (f.is_regular_file() && (name == "report.md" || name == "report.json" || ext == ".png"))
      copy_file(f.path().string(), record_dir + "/" + name);
  }
}

}  // namespace roformer::sweep
