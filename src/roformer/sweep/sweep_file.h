// Sweep files: the YAML that names a base config, its variants (override sets), seeds and the
// evaluation (lengths, protocols, RoPE scaling variants), parsed into a SweepSpec and checked
// whole, every point's config included, before the first run (run_sweep in sweep.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "roformer/config/config_loader.h"

namespace roformer::sweep {

struct SweepVariant {
  std::string name;
  std::vector<std::string> overrides;  // "key.path=value"
  std::string from;  // variants only: an earlier variant whose run of the same seed starts this one (train.init_from)
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
  int64_t max_tokens = 0;               // 0: the config's eval.max_tokens
  std::vector<SweepVariant> scaling;    // evaluated for rope variants, chunks protocol
  std::vector<std::string> scaling_on;  // the variants `scaling` runs on; empty: every rope variant
};

// Whether the scaling variants are evaluated on variant `v` (a rope variant named by scaling_on,
// or any rope variant when scaling_on is empty).
bool scaling_applies(const SweepSpec& s, const SweepVariant& v, const config::Config& c);

// parse_sweep_text on the file's text (a regular file of bounded size).
SweepSpec load_sweep(const std::string& path, const std::vector<std::string>& overrides = {});
// The sweep file's text, parsed as if read from `path` (the base config is resolved against its
// folder); throws UserError naming path:line:col and the key.
// `overrides` (`roformer sweep --set`) follow the file's own `set` list, so they apply to every
// point and win over the file (a variant's `set` still wins over both).
SweepSpec parse_sweep_text(const std::string& text, const std::string& path,
                           const std::vector<std::string>& overrides = {});

// A point's run name ("variant-seedN") and its resolved config.
std::string run_name(const SweepVariant& v, int64_t seed);
config::LoadedConfig point_config(const SweepSpec& s, const SweepVariant& v, int64_t seed);

}  // namespace roformer::sweep
