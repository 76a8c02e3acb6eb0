// YAML -> Config. A YamlApplier walks the schema (Config::visit) alongside one YAML layer,
// converting and range-checking each present key, remembering where it came from, and
// rejecting keys the schema does not know (with a did-you-mean suggestion).
#include "roformer/config/config_loader.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/common/log.h"
#include "roformer/common/strings.h"

namespace fs = std::filesystem;

namespace roformer::config {
namespace {

// Where a layer came from: a file (marks are meaningful) or a --set override.
struct Source {
  std::string label;  // file path or "--set a.b=c"
  bool is_file = true;
};

std::string locate(const Source& src, const YAML::Node& node) {
  if (!src.is_file) return src.label;
  const YAML::Mark m = node.Mark();
  if (m.line < 0) return src.label;
  return src.label + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

std::string scalar_text(const YAML::Node& node) {
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "nothing";
}

template <class T>
std::string range_text(const Range<T>& r) {
  const bool has_lo = r.lo != std::numeric_limits<T>::lowest();
  const bool has_hi = r.hi != std::numeric_limits<T>::max();
  std::ostringstream os;
  if (has_lo && has_hi) {
    os << "in " << (r.lo_open ? "(" : "[") << r.lo << ", " << r.hi << "]";
  } else if (has_lo) {
    os << (r.lo_open ? "> " : ">= ") << r.lo;
  } else if (has_hi) {
    os << "<= " << r.hi;
  }
  return os.str();
}

template <class T>
bool in_range(T v, const Range<T>& r) {
  if (r.lo_open ? !(v > r.lo) : !(v >= r.lo)) return false;
  return v <= r.hi;
}

// Keys that configs of earlier versions wrote (run directories keep them) and this one no longer
// reads: accepted with a warning, so those runs still load, and ignored.
struct RetiredKey {
  const char* key;
  const char* why;
};
constexpr RetiredKey kRetiredKeys[] = {
    {"dist.nccl_engine", "c10d's ProcessGroupNCCL is the only NCCL engine"},
};

bool retired(const std::string& where, const std::string& key) {
  for (const RetiredKey& r : kRetiredKeys) {
    if (key != r.key) continue;
    log::warn(where, ": '", key, "' is no longer read (", r.why, "); it is ignored, remove it");
    return true;
  }
  return false;
}

class YamlApplier : public FieldVisitor {
 public:
  YamlApplier(YAML::Node node, std::string prefix, const Source& src, Origins& origins, bool allow_base)
      : node_(std::move(node)), prefix_(std::move(prefix)), src_(src), origins_(origins) {
    if (allow_base) known_.push_back("base");
  }

  void field(const char* key, int64_t& value, Range<int64_t> range, const char*) override {
    known_.push_back(key);
    YAML::Node n = child(key);
    if (!n) return;
    value = to_int(n, key, range);
    record(key, n);
  }

  void field(const char* key, double& value, Range<double> range, const char*) override {
    known_.push_back(key);
    YAML::Node n = child(key);
    if (!n) return;
    value = to_double(n, key, range);
    record(key, n);
  }

  void field(const char* key, std::vector<double>& value, Range<double> range, const char*) override {
    known_.push_back(key);
    YAML::Node n = child(key);
    if (!n) return;
    std::vector<double> out;
    if (n.IsSequence()) {
      for (const auto& item : n) out.push_back(to_double(item, key, range));
    } else if (n.IsScalar()) {  // "1.0,1.5,2.0" is accepted too (convenient with --set)
      for (const std::string& part : split(n.Scalar(), ',')) {
        YAML::Node item(trim(part));
        out.push_back(to_double(item, key, range, &n));
      }
    } else {
      fail(n, key, "expected a list of numbers, got " + scalar_text(n));
    }
    value = out;  // [] is the unset list (how an unset one is dumped)
    record(key, n);
  }

  void field(const char* key, bool& value, const char*) override {
    known_.push_back(key);
    YAML::Node n = child(key);
    if (!n) return;
    expect_scalar(n, key, "true or false");
    try {
      value = n.as<bool>();
    } catch (const YAML::Exception&) {
      fail(n, key, "expected true or false, got " + scalar_text(n));
    }
    record(key, n);
  }

  void field(const char* key, std::string& value, const char*) override {
    known_.push_back(key);
    YAML::Node n = child(key);
    if (!n) return;
    expect_scalar(n, key, "a string");
    if (!is_plain_utf8(n.Scalar()))
      fail(n, key, "expected UTF-8 text without control characters; write the value in plain characters");
    value = n.Scalar();
    record(key, n);
  }

  void field(const char* key, std::vector<int64_t>& value, Range<int64_t> range, const char*) override {
    known_.push_back(key);
    YAML::Node n = child(key);
    if (!n) return;
    std::vector<int64_t> out;
    if (n.IsSequence()) {
      for (const auto& item : n) out.push_back(to_int(item, key, range));
    } else if (n.IsScalar()) {  // "128,256,512" is accepted too (convenient with --set)
      for (const std::string& part : split(n.Scalar(), ',')) {
        YAML::Node item(trim(part));
        out.push_back(to_int(item, key, range, &n));
      }
    } else {
      fail(n, key, "expected a list of integers, got " + scalar_text(n));
    }
    value = out;  // [] is a value: the lists that cannot be empty say so in validation
    record(key, n);
  }

  void choice(const char* key, std::string& name, const std::vector<std::string>& allowed, const char*) override {
    known_.push_back(key);
    YAML::Node n = child(key);
    if (!n) return;
    expect_scalar(n, key, "one of: " + join(allowed, ", "));
    const std::string v = n.Scalar();
    bool ok = false;
    for (const auto& a : allowed) ok = ok || a == v;
    if (!ok) {
      std::string msg = "'" + v + "' is not allowed; choose one of: " + join(allowed, ", ");
      const std::string guess = closest_match(v, allowed);
      if (!guess.empty()) msg += " (did you mean '" + guess + "'?)";
      fail(n, key, msg);
    }
    name = v;
    record(key, n);
  }

  void section(const char* key, const std::function<void(FieldVisitor&)>& body, const char*) override {
    known_.push_back(key);
    YAML::Node n = child(key);
    if (!n || n.IsNull()) return;
    if (!n.IsMap()) fail(n, key, "expected a mapping of keys, got " + scalar_text(n));
    YamlApplier sub(n, prefix_ + key + ".", src_, origins_, false);
    body(sub);
    sub.finish();
  }

  // Every key in the layer must be one the schema visited; duplicates are refused.
  void finish() const {
    std::set<std::string> seen;
    for (const auto& kv : node_) {
      const YAML::Node& k = kv.first;
      if (!k.IsScalar()) throw UserError(locate(src_, k) + ": keys must be plain names under '" + prefix_ + "'");
      const std::string name = k.Scalar();
      if (!seen.insert(name).second) throw UserError(locate(src_, k) + ": duplicate key '" + prefix_ + name + "'");
      bool known = false;
      for (const auto& kn : known_) known = known || kn == name;
      if (known || retired(locate(src_, k), prefix_ + name)) continue;
      std::string msg = locate(src_, k) + ": unknown key '" + prefix_ + name + "'";
      const std::string guess = closest_match(name, known_);
      if (!guess.empty()) {
        msg += "; did you mean '" + prefix_ + guess + "'?";
      } else {
        msg += "; valid keys here: " + join(known_, ", ");
      }
      throw UserError(msg);
    }
  }

 private:
  YAML::Node child(const char* key) const {
    if (!node_ || !node_.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    for (const auto& kv : node_)
      if (kv.first.IsScalar() && kv.first.Scalar() == key) return kv.second;
    return YAML::Node(YAML::NodeType::Undefined);
  }

  // `where` (when given) is the node to blame in errors, e.g. the whole "128,x" scalar.
  int64_t to_int(const YAML::Node& n, const char* key, const Range<int64_t>& range,
                 const YAML::Node* where = nullptr) const {
    const YAML::Node& at = where ? *where : n;
    if (n.IsNull()) fail(at, key, "has no value; expected an integer");
    if (!n.IsScalar()) fail(at, key, "expected an integer, got " + scalar_text(n));
    int64_t v = 0;
    try {
      v = n.as<int64_t>();
    } catch (const YAML::Exception&) {
      fail(at, key, "expected an integer, got " + scalar_text(n));
    }
    if (!in_range(v, range)) fail(at, key, "= " + std::to_string(v) + " is out of range: must be " + range_text(range));
    return v;
  }

  double to_double(const YAML::Node& n, const char* key, const Range<double>& range,
                   const YAML::Node* where = nullptr) const {
    const YAML::Node& at = where ? *where : n;
    if (n.IsNull()) fail(at, key, "has no value; expected a number");
    if (!n.IsScalar()) fail(at, key, "expected a number, got " + scalar_text(n));
    double v = 0;
    try {
      v = n.as<double>();
    } catch (const YAML::Exception&) {
      fail(at, key, "expected a number, got " + scalar_text(n));
    }
    if (!std::isfinite(v)) fail(at, key, "must be a finite number, got " + scalar_text(n));
    if (!in_range(v, range)) fail(at, key, "= " + n.Scalar() + " is out of range: must be " + range_text(range));
    return v;
  }

  void expect_scalar(const YAML::Node& n, const char* key, const std::string& what) const {
    if (n.IsNull()) fail(n, key, "has no value; expected " + what);
    if (!n.IsScalar()) fail(n, key, "expected " + what + ", got " + scalar_text(n));
  }

  [[noreturn]] void fail(const YAML::Node& n, const char* key, const std::string& msg) const {
    throw UserError(locate(src_, n) + ": " + prefix_ + key + " " + msg);
  }

  void record(const char* key, const YAML::Node& n) { origins_[prefix_ + key] = locate(src_, n); }

  YAML::Node node_;
  std::string prefix_;
  const Source& src_;
  Origins& origins_;
  std::vector<std::string> known_;
};

void apply_layer(LoadedConfig& loaded, const YAML::Node& root, const Source& src, bool allow_base) {
  if (!root || root.IsNull()) return;  // an empty file is a valid (empty) layer
  if (!root.IsMap())
    throw UserError(locate(src, root) + ": a config must be a mapping of sections (model:, train:, ...)");
  if (const YAML::Node v = root["variants"]; v && root["config"])  // a sweep file given as a config
    throw UserError(locate(src, v) +
                    ": this is a sweep file (variants of a base config), not a config; run it with "
                    "`roformer sweep FILE`, or give its base config (its 'config:' key)");
  YamlApplier applier(root, "", src, loaded.origins, allow_base);
  loaded.config.visit(applier);
  applier.finish();
}

constexpr size_t kMaxConfigBytes = size_t{1} << 20;  // a config is a page of YAML, not megabytes
constexpr size_t kMaxBaseDepth = 16;                 // base: chains deeper than this are a mistake

// True when `text` holds anything besides blank lines, comments and document markers.
bool has_content(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    if (line.compare(first, 3, "---") == 0 || line.compare(first, 3, "...") == 0) continue;
    return true;
  }
  return false;
}

YAML::Node parse_yaml(const std::string& text, const std::string& label) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw UserError(label + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                    ": YAML syntax error: " + e.msg);
  }
  // yaml-cpp returns an empty document for some malformed starts (e.g. a leading ','), which
  // would silently mean "all defaults": text that parses to nothing is refused.
  if ((!root || root.IsNull()) && has_content(text))
    throw UserError(label +
                    ": the YAML parser found no document in this text (does it start with a stray "
                    "character?); a config is a mapping of sections (model:, train:, ...)");
  return root;
}

YAML::Node parse_file(const fs::path& path) {
  std::string text;
  try {
    text = read_text_file(path.string(), kMaxConfigBytes);
  } catch (const UserError& e) {
    throw UserError(std::string("config file ") + e.what());
  }
  return parse_yaml(text, path.string());
}

// Applies `path` after recursively applying the base it names; `stack` detects cycles.
void apply_file(LoadedConfig& loaded, const fs::path& path, std::vector<fs::path>& stack) {
  const fs::path canon = fs::weakly_canonical(path);
  for (const auto& p : stack) {
    if (p == canon) {
      std::string chain;
      for (const auto& q : stack) chain += q.string() + " -> ";
      throw UserError("config base cycle: " + chain + canon.string() + "; remove one of the 'base:' links");
    }
  }
  if (!fs::exists(canon)) throw UserError("config file '" + path.string() + "' does not exist");
  if (stack.size() >= kMaxBaseDepth)
    throw UserError("config file '" + path.string() + "': the base: chain is more than " +
                    std::to_string(kMaxBaseDepth) + " files deep; flatten it");
  const YAML::Node root = parse_file(path);
  const Source src{path.string(), true};
  if (root && root.IsMap() && root["base"]) {
    const YAML::Node base = root["base"];
    if (!base.IsScalar() || base.Scalar().empty())
      throw UserError(locate(src, base) + ": base must be a path to another config file");
    const fs::path base_path = path.parent_path() / base.Scalar();
    if (!fs::exists(base_path))
      throw UserError(locate(src, base) + ": base file '" + base.Scalar() + "' not found (looked for " +
                      base_path.string() + ")");
    stack.push_back(canon);
    apply_file(loaded, base_path, stack);
    stack.pop_back();
  }
  apply_layer(loaded, root, src, true);
  loaded.files.push_back(path.string());
}

YAML::Node override_node(const std::string& spec) {
  const std::string shown = "--set " + printable(spec);  // how messages quote it
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UserError(shown + ": expected key.path=value, e.g. --set model.num_layers=4");
  const std::string key = spec.substr(0, eq);
  const std::string text = spec.substr(eq + 1);
  YAML::Node value;
  try {
    value = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw UserError(shown + ": the value is not valid YAML: " + e.msg);
  }
  if (text.empty()) throw UserError(shown + ": the value is empty");
  const std::vector<std::string> parts = split(key, '.');
  // The top-level `base` (a config's parent file) only; model.position.rope.base is a number.
  if (parts.size() == 1 && parts[0] == "base") throw UserError(shown + ": 'base' can only be set in a config file");
  for (const std::string& part : parts) {
    if (part.empty()) throw UserError(shown + ": empty component in key '" + key + "'");
  }
  // Innermost first. (Assigning one YAML::Node to another copies the value into the first
  // node's storage instead of rebinding, so each level is a fresh node.)
  YAML::Node tree = value;
  for (size_t i = parts.size(); i-- > 0;) {
    YAML::Node level(YAML::NodeType::Map);
    level[parts[i]] = tree;
    tree.reset(level);
  }
  return tree;
}

}  // namespace

void apply_config_file(LoadedConfig& loaded, const std::string& path) {
  std::vector<fs::path> stack;
  apply_file(loaded, path, stack);
}

void apply_yaml_text(LoadedConfig& loaded, const std::string& text, const std::string& label) {
  apply_layer(loaded, parse_yaml(text, label), Source{label, true}, false);
}

void apply_overrides(LoadedConfig& loaded, const std::vector<std::string>& overrides) {
  for (const std::string& spec : overrides) {
    const Source src{"--set " + printable(spec), false};
    apply_layer(loaded, override_node(spec), src, false);
  }
  validate(loaded.config, loaded.origins);
  resolve(loaded.config);
}

LoadedConfig load_config(const std::string& path, const std::vector<std::string>& overrides) {
  LoadedConfig loaded;
  std::vector<fs::path> stack;
  apply_file(loaded, fs::path(path), stack);
  apply_overrides(loaded, overrides);
  return loaded;
}

LoadedConfig load_overrides(const std::vector<std::string>& overrides) {
  LoadedConfig loaded;
  apply_overrides(loaded, overrides);
  return loaded;
}

}  // namespace roformer::config
