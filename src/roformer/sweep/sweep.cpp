// Sweep orchestration and report aggregation (see sweep.h).
#include "roformer/sweep/sweep.h"
#include "roformer/sweep/sweep_file.h"
#include "roformer/sweep/sweep_record.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "roformer/common/build_info.h"
#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/common/line_child.h"
#include "roformer/common/log.h"
#include "roformer/common/run_process.h"
#include "roformer/common/strings.h"
#include "roformer/config/config_loader.h"
#include "roformer/eval/extrapolation.h"
#include "roformer/io/checkpoint.h"
#include "roformer/train/trainer.h"

namespace roformer::sweep {
namespace {

using eval::evaluate_checkpoint;
using eval::ExtrapolationReport;
using eval::report_json;
using eval::report_table;
using nlohmann::json;

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? NAN : s / static_cast<double>(v.size());
}

double stdev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

std::string fmt(double x, int precision = 2) {
  if (!std::isfinite(x)) return "n/a";
  std::ostringstream os;
  os << std::fixed << std::setprecision(precision) << x;
  return os.str();
}

std::string mean_std(const std::vector<double>& v, int precision = 2) {
  if (v.empty()) return "n/a";
  return v.size() > 1 ? fmt(mean(v), precision) + " ± " + fmt(stdev(v), precision) : fmt(mean(v), precision);
}

std::vector<std::string> eval_overrides(const SweepSpec& s, const std::string& protocol) {
  std::vector<std::string> o;
  std::string lengths;
  for (int64_t L : s.lengths) lengths += (lengths.empty() ? "" : ",") + std::to_string(L);
  o.push_back("eval.lengths=" + lengths);
  o.push_back("eval.protocol=" + protocol);
  o.push_back("eval.split=" + s.split);
  if (s.max_tokens > 0) o.push_back("eval.max_tokens=" + std::to_string(s.max_tokens));
  return o;
}

// The run directory a `from` variant starts from: the source variant's run of the same seed, beside
// `dir`, which must hold a checkpoint (a run copied from a record has none).
std::string source_run(const SweepVariant& v, int64_t seed, const std::string& dir) {
  const std::string source =
      std::filesystem::path(dir).parent_path().string() + "/" + run_name(SweepVariant{v.from, {}, ""}, seed);
  if (!io::latest_checkpoint(source))
    throw UserError("variant '" + v.name + "' starts from " + source + ", which has no checkpoint (a run copied " +
                    "from a --record folder keeps none); to train it again, delete " + source + " and its record");
  return source;
}

// Trains point `v` into `dir` (resuming a started run) unless its last checkpoint is final, then
// writes each evaluation file it lacks. Returns the training's exit code.
int run_point(const SweepSpec& spec, const SweepVariant& v, const config::LoadedConfig& cfg, const std::string& dir,
              const std::string& where) {
  const auto latest = io::latest_checkpoint(dir);
  if (latest && latest->step >= cfg.config.train.steps) {
    log::info(where, ": trained (step ", latest->step, "), skipping training");
  } else {
    log::info(where, ": training");
    train::TrainOptions opts;
    opts.run_dir = dir;
    opts.resume = "auto";
    config::LoadedConfig point = cfg;
    if (!v.from.empty()) point.config.train.init_from = source_run(v, cfg.config.train.seed, dir);
    const train::TrainResult r = train::run_training(point, opts);
    if (r.exit_code != 0) return r.exit_code;
  }
  const std::string ckpt = io::latest_checkpoint(dir)->dir;
  make_directories(dir + "/eval");
  auto run_eval = [&](const std::string& file, const std::vector<std::string>& o) {
    if (path_exists(file)) return;
    const ExtrapolationReport rep = evaluate_checkpoint(ckpt, o);
    std::cout << report_table(rep);
    write_file_atomic(file, report_json(rep));
  };
  for (const auto& p : spec.protocols) run_eval(dir + "/eval/" + p + ".json", eval_overrides(spec, p));
  if (scaling_applies(spec, v, cfg.config)) {
    for (const auto& sc : spec.scaling) {
      std::vector<std::string> o =
          eval_overrides(spec, config::eval_protocol_names().name(config::EvalProtocol::chunks));
      o.insert(o.end(), sc.overrides.begin(), sc.overrides.end());
      run_eval(dir + "/eval/chunks-" + sc.name + ".json", o);
    }
  }
  return 0;
}

}  // namespace

int run_sweep(const SweepSpec& spec_in, const std::string& out, int64_t seeds_override, const std::string& record) {
  SweepSpec spec = spec_in;
  if (seeds_override > 0) {
    const int64_t first = spec.seeds.front();
    spec.seeds.clear();
    for (int64_t i = 0; i < seeds_override; ++i) spec.seeds.push_back(first + i);
  }
  if (!record.empty()) check_record_dir(record);
  helper_timeout_seconds();  // the plot renderer's bound: a bad value is refused now, not after the runs
  make_directories(out + "/runs");
  const size_t points = spec.variants.size() * spec.seeds.size();
  size_t index = 0;
  for (const auto& v : spec.variants) {
    for (int64_t seed : spec.seeds) {
      ++index;
      const std::string name = run_name(v, seed);
      const std::string dir = out + "/runs/" + name;
      const config::LoadedConfig cfg = point_config(spec, v, seed);
      const std::vector<std::string> evals = eval_files(spec, v, cfg.config);
      const std::string where = "[" + std::to_string(index) + "/" + std::to_string(points) + "] " + name;
      if (!record.empty() && restore_point(record, name, dir, evals))
        log::info(where, ": finished in ", record, ", copied from there");
      if (point_finished(dir, evals)) {
        log::info(where, ": trained and evaluated, skipping");
        if (!record.empty()) record_point(dir, record, name, evals);
        continue;
      }
      const int exit_code = run_point(spec, v, cfg, dir, where);
      if (exit_code != 0) return exit_code;
      if (!record.empty()) record_point(dir, record, name, evals);
    }
  }
  write_sweep_report(spec, out);
  if (!record.empty()) record_report(out, record);
  return 0;
}

namespace {

// A run's train and validation losses into run["train"] / run["valid"]. A last line cut short
// (what kill -9 leaves mid-write) is skipped; any other bad line is a UserError naming it.
void read_metrics(const std::string& path, json& run) {
  std::istringstream in(read_text_file(path));
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    json r;
    try {
      r = json::parse(line);
      if (!r.is_object() || !r.contains("type") || !r.contains("step") || !r.contains("loss")) continue;
      if (r["type"] == "train") run["train"].push_back({r.at("step").get<int64_t>(), r.at("loss").get<double>()});
      if (r["type"] == "eval") run["valid"].push_back({r.at("step").get<int64_t>(), r.at("loss").get<double>()});
    } catch (const json::exception& e) {
      if (in.peek() == std::char_traits<char>::eof()) {
        log::warn(path, ":", number, ": last line is incomplete (the run was killed mid-write); skipped");
        break;
      }
      throw UserError(path + ":" + std::to_string(number) + ": not a metrics record (" + e.what() +
                      "); restore the file or delete the run to retrain it");
    }
  }
}

// One evaluation result (eval/PROTOCOL[-SCALING].json), checked to have the fields the report reads.
json read_eval_file(const std::string& path) {
  try {
    json j = json::parse(read_text_file(path));
    for (const auto& r : j.at("results")) {
      (void)r.at("length").get<int64_t>();
      if (r.at("applicable").get<bool>()) (void)r.at("ppl").get<double>();
    }
    return j;
  } catch (const json::exception& e) {
    throw UserError("'" + path + "' is not an evaluation result (" + e.what() +
                    "); move it out of the run's eval/ folder, or delete it to evaluate again");
  }
}

// The plots of report.json (scripts/studies/plot_report.py, the renderer every study's report uses) in the
// Python of our services; a missing renderer, a Python without matplotlib or one that takes more
// than ROFORMER_HELPER_TIMEOUT_S (default 120 s) costs the plots and a warning, never the report.
void draw_plots(const std::string& out) {
  const std::string script = build_info().source_dir + "/scripts/studies/plot_report.py";
  if (!path_exists(script)) {
    log::warn("no ", script, ": skipped the plots (report.md and report.json are written)");
    return;
  }
  const std::string python = service_python();
  const double timeout = helper_timeout_seconds();
  const ProcessOutcome r = run_process({python, script, out + "/report.json", out}, timeout);
  if (r.ok()) return;
  const std::string why =
      !r.started    ? "could not start " + python
      : r.timed_out ? "it took more than " + shortest_double(timeout) + " s (ROFORMER_HELPER_TIMEOUT_S) and was stopped"
                    : "it exited " + std::to_string(r.exit_code) + " (its message is above)";
  log::warn("the plots were not drawn: ", why,
            "; run scripts/setup.sh for a .venv with matplotlib, or set "
            "ROFORMER_PYTHON, then: ",
            python, " ", script, " ", out, "/report.json ", out);
}

}  // namespace

void write_sweep_report(const SweepSpec& spec, const std::string& out) {
  json report = {{"name", spec.name},
                 {"sweep_file", spec.file},
                 {"config", spec.config},
                 {"seeds", spec.seeds},
                 {"lengths", spec.lengths},
                 {"protocols", spec.protocols},
                 {"git_revision", build_info().git_revision},
                 {"variants", json::array()}};
  int64_t train_length = 0, steps = 0;
  std::string objective;
  for (const auto& v : spec.variants) {
    json jv = {{"name", v.name}, {"runs", json::array()}};
    for (int64_t seed : spec.seeds) {
      const std::string dir = out + "/runs/" + run_name(v, seed);
      if (!path_exists(dir + "/metrics.jsonl")) continue;
      const config::Config c = point_config(spec, v, seed).config;
      train_length = c.data.seq_len;
      steps = c.train.steps;
      const std::string obj = config::objective_names().name(c.model.objective);
      objective = objective.empty() || objective == obj ? obj : "mixed";
      json run = {
          {"seed", seed}, {"dir", dir}, {"train", json::array()}, {"valid", json::array()}, {"eval", json::object()}};
      read_metrics(dir + "/metrics.jsonl", run);
      if (is_directory(dir + "/eval"))
        for (const auto& f : std::filesystem::directory_iterator(dir + "/eval"))
          if (f.path().extension() == ".json")
            run["eval"][f.path().stem().string()] = read_eval_file(f.path().string());
      jv["runs"].push_back(run);
    }
    report["variants"].push_back(jv);
  }
  report["train_length"] = train_length;
  report["steps"] = steps;
  report["objective"] = objective;
  write_file_atomic(out + "/report.json", report.dump(1) + "\n");

  // ---- report.md
  auto ppl_at = [&](const json& jv, const std::string& key, int64_t L) {
    std::vector<double> v;
    for (const auto& run : jv["runs"]) {
      if (!run["eval"].contains(key)) continue;
      for (const auto& r : run["eval"][key]["results"])
        if (r["length"] == L && r["applicable"].get<bool>()) v.push_back(r["ppl"].get<double>());
    }
    return v;
  };
  std::ostringstream md;
  md << "# Sweep report: " << spec.name << "\n\n"
     << "Base config `" << spec.config << "`, objective " << objective << ", " << steps << " steps, training length "
     << train_length << ", seeds " << json(spec.seeds).dump() << ", evaluation split `" << spec.split << "`, git "
     << build_info().git_revision << ". Values are mean ± sample std over seeds; perplexity is per "
     << (objective == config::objective_names().name(config::Objective::mlm) ? "masked token (fixed evaluation masks)"
         : objective == config::objective_names().name(config::Objective::causal_lm)
             ? "next token"
             : "masked token for MLM variants and next token for causal-LM variants")
     << ".\n\n";
  md << "## In-distribution (validation at the training length)\n\n| variant | final valid loss | valid ppl "
        "|\n|---|---|---|\n";
  for (const auto& jv : report["variants"]) {
    std::vector<double> losses;
    for (const auto& run : jv["runs"])
      if (!run["valid"].empty()) losses.push_back(run["valid"].back()[1].get<double>());
    std::vector<double> ppls;
    for (double l : losses) ppls.push_back(std::exp(l));
    md << "| " << jv["name"].get<std::string>() << " | " << mean_std(losses, 4) << " | " << mean_std(ppls, 2) << " |\n";
  }
  for (const auto& protocol : spec.protocols) {
    md << "\n## Perplexity by evaluation length (" << protocol << " protocol)\n\n| variant |";
    for (int64_t L : spec.lengths)
      md << " " << L << " (" << fmt(static_cast<double>(L) / std::max<int64_t>(1, train_length), 0) << "×) |";
    md << "\n|---|";
    for (size_t i = 0; i < spec.lengths.size(); ++i) md << "---|";
    md << "\n";
    for (const auto& jv : report["variants"]) {
      md << "| " << jv["name"].get<std::string>() << " |";
      for (int64_t L : spec.lengths) md << " " << mean_std(ppl_at(jv, protocol, L)) << " |";
      md << "\n";
    }
    md << "\nRatio to the training length (mean ppl at L / mean ppl at " << train_length << "):\n\n| variant |";
    for (int64_t L : spec.lengths) md << " " << L << " |";
    md << "\n|---|";
    for (size_t i = 0; i < spec.lengths.size(); ++i) md << "---|";
    md << "\n";
    for (const auto& jv : report["variants"]) {
      const double base = mean(ppl_at(jv, protocol, train_length));
      md << "| " << jv["name"].get<std::string>() << " |";
      for (int64_t L : spec.lengths) md << " " << fmt(mean(ppl_at(jv, protocol, L)) / base) << " |";
      md << "\n";
    }
  }
  if (!spec.scaling.empty()) {
    md << "\n## RoPE context extension at evaluation time (chunks protocol, no retraining)\n\n| rope variant | scaling "
          "|";
    for (int64_t L : spec.lengths) md << " " << L << " |";
    md << "\n|---|---|";
    for (size_t i = 0; i < spec.lengths.size(); ++i) md << "---|";
    md << "\n";
    for (const auto& jv : report["variants"]) {
      bool any = false;
      for (const auto& run : jv["runs"]) any = any || run["eval"].contains("chunks-" + spec.scaling.front().name);
      if (!any) continue;
      md << "| " << jv["name"].get<std::string>() << " | none |";
      for (int64_t L : spec.lengths)
        md << " " << mean_std(ppl_at(jv, config::eval_protocol_names().name(config::EvalProtocol::chunks), L)) << " |";
      md << "\n";
      for (const auto& sc : spec.scaling) {
        md << "| " << jv["name"].get<std::string>() << " | " << sc.name << " |";
        for (int64_t L : spec.lengths) md << " " << mean_std(ppl_at(jv, "chunks-" + sc.name, L)) << " |";
        md << "\n";
      }
    }
  }
  // The plots first, so the report links only those that were drawn (none without matplotlib).
  for (const char* png : {"loss_vs_step.png", "ppl_vs_length.png", "loss_by_position.png"})
    std::filesystem::remove(out + "/" + png);
  draw_plots(out);
  std::string plots;
  for (const auto& [file, title] : {std::pair<const char*, const char*>{"loss_vs_step.png", "loss vs step"},
                                    {"ppl_vs_length.png", "perplexity vs length"},
                                    {"loss_by_position.png", "loss by position"}})
    if (path_exists(out + "/" + file)) plots += std::string("\n![") + title + "](" + file + ")\n";
  md << "\n## Plots\n" << (plots.empty() ? "\nNot drawn (no Python with matplotlib; see the log).\n" : plots);
  write_file_atomic(out + "/report.md", md.str());
  log::info("wrote ", out, "/report.md and report.json");
}

}  // namespace roformer::sweep
