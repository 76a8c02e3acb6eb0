// Ablation sweeps: a sweep file names a base config, variants (override sets, e.g. the
// position family), seeds, evaluation lengths/protocols and RoPE scaling variants. run_sweep
// trains and evaluates every (variant, seed) point in its own run directory, skips points
// already finished (so a half-done sweep resumes), aggregates across seeds (mean +- std) and
// writes report.md, report.json and (via scripts/plot_report.py) PNG plots.
#pragma once

#include <string>
#include <vector>

namespace roformer::sweep {

struct SweepVariant {
  std::string name;
  std::vector<std::string> overrides;  // "key.path=value"
};

struct SweepSpec {
  std::string file;
  std::string name;
  std::string config;                  // base config path (resolved against the sweep file)
  std::vector<std::string> overrides;  // applied to every point
  std::vector<int64_t> seeds;
  std::vector<SweepVariant> variants;
  std::vector<int64_t> lengths;
  std::vector<std::string> protocols;  // chunks | sliding
  std::string split = "valid";
  int64_t max_tokens = 0;             // 0: the config's eval.max_tokens
  std::vector<SweepVariant> scaling;  // evaluated for rope variants, chunks protocol
};

// Parses and validates a sweep file; throws UserError naming file:line:col and the key.
SweepSpec load_sweep(const std::string& path);

// Runs (or resumes) the sweep into out_dir; seeds_override > 0 uses that many seeds
// (base seed, base+1, ...). Returns 0, or the first failing point's exit code.
int run_sweep(const SweepSpec& spec, const std::string& out_dir, int64_t seeds_override);

// Aggregates finished points under out_dir into report.md and report.json (no training).
void write_sweep_report(const SweepSpec& spec, const std::string& out_dir);

}  // namespace roformer::sweep
