// The sweep file (see sweep_file.h): YAML -> SweepSpec, every entry and every point's config
// checked before the first run. Needs no LibTorch, so the fuzz target links it alone.
#include "roformer/sweep/sweep_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <limits>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/common/strings.h"
#include "roformer/config/position_families.h"

namespace roformer::sweep {
namespace {

std::string where(const std::string& file, const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  return file + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

std::vector<std::string> string_list(const std::string& file, const YAML::Node& n, const std::string& key) {
  std::vector<std::string> out;
  if (!n) return out;
  if (!n.IsSequence()) throw UserError(where(file, n) + ": " + key + " must be a list of \"key=value\" strings");
  for (const auto& item : n) {
    if (!item.IsScalar() || item.Scalar().find('=') == std::string::npos)
      throw UserError(where(file, item) + ": " + key + " entries must look like key.path=value");
    out.push_back(item.Scalar());
  }
  return out;
}

std::vector<SweepVariant> variants(const std::string& file, const YAML::Node& n, const std::string& key) {
  std::vector<SweepVariant> out;
  if (!n) return out;
  if (!n.IsSequence()) throw UserError(where(file, n) + ": " + key + " must be a list of {name, set}");
  for (const auto& v : n) {
    if (!v.IsMap() || !v["name"] || !v["name"].IsScalar())
      throw UserError(where(file, v) + ": each " + key + " entry needs a name");
    const bool takes_from = key == "variants";
    for (const auto& kv : v)
      if (kv.first.Scalar() != "name" && kv.first.Scalar() != "set" && !(takes_from && kv.first.Scalar() == "from"))
        throw UserError(where(file, kv.first) + ": unknown key '" + kv.first.Scalar() + "' in " + key +
                        (takes_from ? " (name, set, from)" : " (name, set)"));
    const std::string name = v["name"].Scalar();
    // It names a directory or file.
    check_path_component(name, where(file, v["name"]) + ": " + (key == "variants" ? "variant" : key) + " name");
    for (const auto& earlier : out)
      if (earlier.name == name)
        throw UserError(where(file, v["name"]) + ": two " + key + " entries are named '" + name +
                        "' (each names its own runs and results); rename one");
    out.push_back({name, string_list(file, v["set"], key + ".set"), ""});
    if (const YAML::Node from = v["from"]) {
      const std::string source = from.IsScalar() ? from.Scalar() : std::string();
      const bool earlier =
          std::any_of(out.begin(), out.end() - 1, [&](const SweepVariant& e) { return e.name == source; });
      if (!earlier)
        throw UserError(where(file, from) + ": from names '" + source + "', which is not a variant listed before '" +
                        name + "'; name the variant whose runs this one starts from, above it");
      out.back().from = source;
    }
  }
  return out;
}

// The integer at `n`, in [lo, hi], or a UserError naming its line (never yaml-cpp's conversion error).
int64_t int_at(const std::string& file, const YAML::Node& n, const std::string& what, int64_t lo, int64_t hi) {
  const std::string text = n.IsScalar() ? n.Scalar() : std::string();
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (!n.IsScalar() || text.empty() || ec != std::errc() || end != text.data() + text.size() || value < lo ||
      value > hi)
    throw UserError(where(file, n) + ": " + what + " must be an integer in [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "], got " + (n.IsScalar() ? "'" + text + "'" : std::string("a list or map")));
  return value;
}

// The list at `n` (absent: empty), or a UserError naming its line.
YAML::Node list_at(const std::string& file, const YAML::Node& n, const std::string& what) {
  if (n && !n.IsSequence()) throw UserError(where(file, n) + ": " + what + " must be a list");
  return n;
}

}  // namespace

std::string run_name(const SweepVariant& v, int64_t seed) {
  return v.name + "-seed" + std::to_string(seed);
}

bool scaling_applies(const SweepSpec& s, const SweepVariant& v, const config::Config& c) {
  if (!config::position_family(c.model.position.kind).traits.context_extension) return false;
  return s.scaling_on.empty() || std::find(s.scaling_on.begin(), s.scaling_on.end(), v.name) != s.scaling_on.end();
}

config::LoadedConfig point_config(const SweepSpec& s, const SweepVariant& v, int64_t seed) {
  std::vector<std::string> o = s.overrides;
  o.insert(o.end(), v.overrides.begin(), v.overrides.end());
  o.push_back("train.seed=" + std::to_string(seed));
  o.push_back("name=" + s.name + "-" + run_name(v, seed));
  return config::load_config(s.config, o);
}

// Every entry of the sweep file checked, and every point's config validated, before any run.
// point_config, with a config error placed: the sweep file and the variant it came from.
static config::LoadedConfig checked_point(const SweepSpec& s, const SweepVariant& v, const std::string& scaling = "") {
  try {
    return point_config(s, v, s.seeds.front());
  } catch (const UserError& e) {
    throw UserError(s.file + ", variant '" + v.name + "'" + (scaling.empty() ? "" : " with scaling '" + scaling + "'") +
                    " (the file's set, then --set, then the variant's set): " + e.what());
  }
}

// `roformer sweep --set eval.lengths|protocol|split|max_tokens=...` wins over the sweep file's eval
// block as it wins over the file's set: the values are read back from the config they resolve to.
static void apply_cli_eval_keys(SweepSpec& s, const std::vector<std::string>& cli_overrides) {
  auto given = [&](const std::string& key) {
    return std::any_of(cli_overrides.begin(), cli_overrides.end(),
                       [&](const std::string& o) { return o.rfind(key + "=", 0) == 0; });
  };
  if (!given("eval.lengths") && !given("eval.protocol") && !given("eval.split") && !given("eval.max_tokens")) return;
  config::EvalConfig e;
  try {
    e = config::load_config(s.config, s.overrides).config.eval;
  } catch (const UserError& err) {
    throw UserError(s.file + " (the file's set, then --set): " + err.what());
  }
  if (given("eval.lengths")) s.lengths = e.lengths;
  if (given("eval.protocol")) s.protocols = {config::eval_protocol_names().name(e.protocol)};
  if (given("eval.split")) s.split = e.split;
  if (given("eval.max_tokens")) s.max_tokens = e.max_tokens;
}

static SweepSpec parse_sweep(const std::string& path, const YAML::Node& root,
                             const std::vector<std::string>& cli_overrides) {
  if (!root.IsMap()) throw UserError(path + ": a sweep file is a mapping (name, config, variants, seeds, eval)");
  static const std::vector<std::string> known{"name", "config", "set", "seeds", "variants", "eval"};
  for (const auto& kv : root) {
    if (std::find(known.begin(), known.end(), kv.first.Scalar()) == known.end())
      throw UserError(where(path, kv.first) + ": unknown key '" + kv.first.Scalar() +
                      "' (valid: name, config, set, seeds, variants, eval)");
  }
  SweepSpec s;
  s.file = path;
  s.name = root["name"] ? root["name"].Scalar() : std::filesystem::path(path).stem().string();
  check_path_component(s.name, path + ": sweep name");
  if (!root["config"]) throw UserError(path + ": 'config' (the base config file) is required");
  s.config = (std::filesystem::path(path).parent_path() / root["config"].Scalar()).string();
  if (!path_exists(s.config))
    throw UserError(where(path, root["config"]) + ": config file '" + s.config + "' does not exist");
  s.overrides = string_list(path, root["set"], "set");
  s.overrides.insert(s.overrides.end(), cli_overrides.begin(), cli_overrides.end());
  for (const auto& x : list_at(path, root["seeds"], "seeds")) {
    const int64_t seed = int_at(path, x, "a seed", 0, std::numeric_limits<int64_t>::max());
    if (std::find(s.seeds.begin(), s.seeds.end(), seed) != s.seeds.end())
      throw UserError(where(path, x) + ": seed " + std::to_string(seed) + " is listed twice (each seed is one run)");
    s.seeds.push_back(seed);
  }
  if (s.seeds.empty()) s.seeds.push_back(1234);
  s.variants = variants(path, root["variants"], "variants");
  if (s.variants.empty()) throw UserError(path + ": 'variants' must list at least one {name, set}");
  const YAML::Node e = root["eval"];
  if (e && !e.IsMap())
    throw UserError(where(path, e) + ": eval must be a mapping (lengths, protocols, split, max_tokens, scaling)");
  if (e && e["protocol"] && e["protocols"])
    throw UserError(where(path, e["protocol"]) +
                    ": eval.protocol and eval.protocols are both set; keep one (protocols "
                    "takes a list, protocol one name, as a config's eval block has it)");
  if (e) {
    for (const auto& kv : e) {
      const std::string k = kv.first.Scalar();
      if (k != "lengths" && k != "protocols" && k != "protocol" && k != "split" && k != "max_tokens" &&
          k != "scaling" && k != "scaling_on")
        throw UserError(where(path, kv.first) + ": unknown key 'eval." + k +
                        "' (lengths, protocols or protocol, split, max_tokens, scaling, scaling_on)");
    }
    for (const auto& x : list_at(path, e["lengths"], "eval.lengths"))
      s.lengths.push_back(int_at(path, x, "an eval length", 2, int64_t{1} << 30));
    for (const auto& x : list_at(path, e["protocols"], "eval.protocols")) s.protocols.push_back(x.Scalar());
    if (e["protocol"]) {  // a config's eval block, pasted: one protocol
      if (!e["protocol"].IsScalar())
        throw UserError(where(path, e["protocol"]) +
                        ": eval.protocol is one name (chunks or sliding); for several, "
                        "use eval.protocols: [chunks, sliding]");
      s.protocols.push_back(e["protocol"].Scalar());
    }
    if (e["split"]) s.split = e["split"].Scalar();
    if (e["max_tokens"])
      s.max_tokens = int_at(path, e["max_tokens"], "eval.max_tokens", 0, std::numeric_limits<int64_t>::max());
    s.scaling = variants(path, e["scaling"], "eval.scaling");
    for (const auto& x : list_at(path, e["scaling_on"], "eval.scaling_on")) {
      const std::string name = x.IsScalar() ? x.Scalar() : std::string();
      const bool known_variant =
          std::any_of(s.variants.begin(), s.variants.end(), [&](const SweepVariant& v) { return v.name == name; });
      if (!known_variant)
        throw UserError(where(path, x) + ": eval.scaling_on names '" + name +
                        "', which is not one of the sweep's variants; use a variant's name");
      s.scaling_on.push_back(name);
    }
  }
  apply_cli_eval_keys(s, cli_overrides);
  const auto& protocols = config::eval_protocol_names();
  if (s.protocols.empty()) s.protocols = {protocols.name(config::EvalProtocol::chunks)};
  for (const auto& p : s.protocols) {
    const auto allowed = protocols.names();
    if (std::find(allowed.begin(), allowed.end(), p) == allowed.end())
      throw UserError(path + ": eval.protocols entries must be one of " + join(allowed, ", ") + ", got '" + p + "'");
  }
  // Validate every point's config now, so a typo fails before hours of training; the scaling
  // variants too, on every variant they run on (a list may fit one head size and not another).
  if (!s.scaling_on.empty() && s.scaling.empty())
    throw UserError(path +
                    ": eval.scaling_on names variants to scale but eval.scaling lists no scaling; add "
                    "eval.scaling entries (name and set) or remove eval.scaling_on");
  bool scaled = false;
  for (const auto& v : s.variants) {
    const config::Config c = checked_point(s, v).config;
    if (s.scaling.empty() || !scaling_applies(s, v, c)) continue;
    scaled = true;
    for (const auto& sc : s.scaling) {
      SweepVariant with = v;
      with.overrides.insert(with.overrides.end(), sc.overrides.begin(), sc.overrides.end());
      checked_point(s, with, sc.name);
    }
  }
  if (!s.scaling_on.empty() && !scaled)
    throw UserError(path + ": eval.scaling_on names no rope variant (scaling applies to model.position.kind=rope)");
  if (s.lengths.empty()) s.lengths = checked_point(s, s.variants.front()).config.eval.lengths;
  return s;
}

SweepSpec load_sweep(const std::string& path, const std::vector<std::string>& overrides) {
  if (!path_exists(path)) throw UserError("sweep file '" + path + "' does not exist");
  return parse_sweep_text(read_text_file(path), path,
                          overrides);  // a regular file of bounded size (not a FIFO or device)
}

SweepSpec parse_sweep_text(const std::string& text, const std::string& path,
                           const std::vector<std::string>& overrides) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw UserError(path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                    ": YAML syntax error: " + e.msg);
  }
  try {
    return parse_sweep(path, root, overrides);
  } catch (const YAML::Exception& e) {  // a shape the checks did not foresee: still the file's fault
    throw UserError(path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) + ": " +
                    e.msg);
  }
}

}  // namespace roformer::sweep
