// Ablation sweeps: a sweep file names a base config, variants (override sets, e.g. the
// position family), seeds, evaluation lengths/protocols and RoPE scaling variants. run_sweep
// trains and evaluates every (variant, seed) point in its own run directory, skips points
// already finished (so a half-done sweep resumes), aggregates across seeds (mean +- std) and
// writes report.md, report.json and (via scripts/studies/plot_report.py) PNG plots.
#pragma once

#include <string>
#include <vector>

#include "roformer/sweep/sweep_file.h"

namespace roformer::sweep {

// Runs (or resumes) the sweep into out_dir; seeds_override > 0 uses that many seeds
// (base seed, base+1, ...). A point is skipped once finished (its metrics and evaluations exist,
// checkpoints or not). With a record folder (sweep_record.h), finished points recorded there are
// copied in instead of trained, and each point is recorded there as it finishes, the report at
// the end. Returns 0, or the first failing point's exit code.
int run_sweep(const SweepSpec& spec, const std::string& out_dir, int64_t seeds_override,
              const std::string& record_dir = "");

// Aggregates finished points under out_dir into report.md and report.json (no training).
void write_sweep_report(const SweepSpec& spec, const std::string& out_dir);

}  // namespace roformer::sweep
