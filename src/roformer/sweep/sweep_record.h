// Sweep records: what a finished point leaves that a report needs (metrics.jsonl, the resolved
// config.yaml and eval/*.json, a few kilobytes, no checkpoints), copied into a folder meant to be
// committed (`roformer sweep --record DIR`), and copied back into a fresh output folder so a rerun
// on another machine skips every recorded point instead of training it again.
#pragma once

#include <string>
#include <vector>

#include "roformer/config/config.h"
#include "roformer/sweep/sweep_file.h"

namespace roformer::sweep {

// Throws UserError unless record_dir is a folder this process can write (creating it), so a bad
// --record fails before the first point trains.
void check_record_dir(const std::string& record_dir);

// The evaluation files a finished point has, relative to its run directory: eval/<protocol>.json
// per protocol, and eval/chunks-<scaling>.json per scaling variant that applies to it.
std::vector<std::string> eval_files(const SweepSpec& s, const SweepVariant& v, const config::Config& c);

// A point is finished when its metrics.jsonl and every one of `evals` exist (evaluations are
// written only after training reaches its last step), with or without its checkpoints.
bool point_finished(const std::string& run_dir, const std::vector<std::string>& evals);

// When record_dir/runs/<name> holds a finished point and run_dir has no metrics.jsonl yet (nothing
// there would be overwritten), copies the record into run_dir and returns true.
bool restore_point(const std::string& record_dir, const std::string& name, const std::string& run_dir,
                   const std::vector<std::string>& evals);

// Copies a finished point's metrics.jsonl, config.yaml and `evals` into record_dir/runs/<name>,
// each file written atomically.
void record_point(const std::string& run_dir, const std::string& record_dir, const std::string& name,
                  const std::vector<std::string>& evals);

// Copies the sweep's report.md, report.json and PNG plots from out_dir into record_dir.
void record_report(const std::string& out_dir, const std::string& record_dir);

}  // namespace roformer::sweep
