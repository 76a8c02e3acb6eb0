// Config -> YAML text (the resolved dump saved with runs and checkpoints), a flat key=value
// view (for architecture comparison), and the schema listing shown by `config schema` (plain or
// markdown, the reference in docs/configs.md).
#include <yaml-cpp/yaml.h>

#include <sstream>

#include "roformer/common/strings.h"
#include "roformer/config/config_loader.h"
#include "roformer/config/layer_layout.h"

namespace roformer::config {
namespace {

class YamlDumper : public FieldVisitor {
 public:
  explicit YamlDumper(YAML::Emitter& out) : out_(out) {}
  void field(const char* key, int64_t& v, Range<int64_t>, const char*) override {
    out_ << YAML::Key << key << YAML::Value << v;
  }
  void field(const char* key, double& v, Range<double>, const char*) override {
    out_ << YAML::Key << key << YAML::Value << shortest_double(v);
  }
  void field(const char* key, bool& v, const char*) override { out_ << YAML::Key << key << YAML::Value << v; }
  void field(const char* key, std::string& v, const char*) override {
    out_ << YAML::Key << key << YAML::Value << YAML::DoubleQuoted << v;
  }
  void field(const char* key, std::vector<int64_t>& v, Range<int64_t>, const char*) override {
    out_ << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (int64_t x : v) out_ << x;
    out_ << YAML::EndSeq;
  }
  void field(const char* key, std::vector<double>& v, Range<double>, const char*) override {
    out_ << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (double x : v) out_ << shortest_double(x);
    out_ << YAML::EndSeq;
  }
  void choice(const char* key, std::string& name, const std::vector<std::string>&, const char*) override {
    out_ << YAML::Key << key << YAML::Value << name;
  }
  void section(const char* key, const std::function<void(FieldVisitor&)>& body, const char*) override {
    out_ << YAML::Key << key << YAML::Value << YAML::BeginMap;
    body(*this);
    out_ << YAML::EndMap;
  }

 private:
  YAML::Emitter& out_;
};

// Visits every field as (path, text value, type, help) rows.
class Flattener : public FieldVisitor {
 public:
  struct Row {
    std::string path, value, type, help;
  };
  std::vector<Row> rows;

  void field(const char* key, int64_t& v, Range<int64_t>, const char* help) override {
    add(key, std::to_string(v), "int", help);
  }
  void field(const char* key, double& v, Range<double>, const char* help) override {
    add(key, shortest_double(v), "float", help);
  }
  void field(const char* key, bool& v, const char* help) override { add(key, v ? "true" : "false", "bool", help); }
  void field(const char* key, std::string& v, const char* help) override { add(key, "\"" + v + "\"", "string", help); }
  void field(const char* key, std::vector<int64_t>& v, Range<int64_t>, const char* help) override {
    std::vector<std::string> parts;
    for (int64_t x : v) parts.push_back(std::to_string(x));
    add(key, "[" + join(parts, ", ") + "]", "int list", help);
  }
  void field(const char* key, std::vector<double>& v, Range<double>, const char* help) override {
    std::vector<std::string> parts;
    for (double x : v) parts.push_back(shortest_double(x));
    add(key, "[" + join(parts, ", ") + "]", "float list", help);
  }
  void choice(const char* key, std::string& name, const std::vector<std::string>& allowed, const char* help) override {
    add(key, name, join(allowed, "|"), help);
  }
  void section(const char* key, const std::function<void(FieldVisitor&)>& body, const char*) override {
    const std::string saved = prefix_;
    prefix_ += std::string(key) + ".";
    body(*this);
    prefix_ = saved;
  }

 private:
  void add(const char* key, std::string value, std::string type, const char* help) {
    rows.push_back({prefix_ + key, std::move(value), std::move(type), help ? help : ""});
  }
  std::string prefix_;
};

}  // namespace

std::string dump_yaml(const Config& config) {
  Config copy = config;  // visit() takes mutable references; the dump must not change anything
  YAML::Emitter out;
  out << YAML::BeginMap;
  YamlDumper dumper(out);
  copy.visit(dumper);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::vector<std::pair<std::string, std::string>> flatten(const Config& config) {
  Config copy = config;
  Flattener f;
  copy.visit(f);
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& r : f.rows) out.emplace_back(r.path, r.value);
  return out;
}

std::string schema_text() {
  Config defaults;
  Flattener f;
  defaults.visit(f);
  size_t w_path = 0, w_type = 0, w_value = 0;
  for (const auto& r : f.rows) {
    w_path = std::max(w_path, r.path.size());
    w_type = std::max(w_type, r.type.size());
    w_value = std::max(w_value, r.value.size());
  }
  std::ostringstream os;
  for (const auto& r : f.rows) {
    os << r.path << std::string(w_path - r.path.size() + 2, ' ') << r.type
       << std::string(w_type - r.type.size() + 2, ' ') << r.value << std::string(w_value - r.value.size() + 2, ' ')
       << r.help << "\n";
  }
  return os.str();
}

std::string schema_markdown() {
  Config defaults;
  Flattener f;
  defaults.visit(f);
  // A '|' inside a cell would end it: GitHub markdown takes "\|", also inside code spans.
  const auto cell = [](const std::string& text) {
    std::string out;
    for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
    return out;
  };
  std::ostringstream os;
  std::string section;
  for (const auto& r : f.rows) {
    const std::string top = r.path.substr(0, r.path.find('.'));
    const std::string group = top == r.path ? "(top level)" : top;
    if (group != section) {
      os << (section.empty() ? "" : "\n") << "### " << group << "\n\n"
         << "| key | type | default | meaning |\n|---|---|---|---|\n";
      section = group;
    }
    os << "| `" << r.path << "` | " << cell(r.type) << " | `" << cell(r.value) << "` | " << cell(r.help) << " |\n";
  }
  return os.str();
}

std::string config_summary(const Config& c) {
  const ModelConfig& m = c.model;
  std::ostringstream os;
  os << c.name << ": " << position_kind_names().name(m.position.kind) << ", " << objective_names().name(m.objective)
     << ", " << m.num_layers << " layers of width " << m.hidden_size << " (" << m.num_heads << " heads, ffn "
     << m.ffn_size << "), vocabulary " << m.vocab_size;
  if (has_layout(m)) os << "\n  layout " << describe_layout(m);
  os << "\n  data ";
  if (c.data.task.name != TaskKind::none) {
    os << "task " << task_kind_names().name(c.data.task.name);
    if (c.data.task.sizes.size() == 2)
      os << " at instance sizes " << c.data.task.sizes[0] << ".." << c.data.task.sizes[1] << ", lengths up to ";
    else
      os << " at lengths ";
    if (c.data.task.min_length > 0) os << c.data.task.min_length << "..";
  } else {
    os << c.data.path << " at length ";
  }
  os << c.data.seq_len;
  if (c.data.packing != DataPacking::stream)
    os << (c.data.packing == DataPacking::documents ? " (packed documents)" : " (one document per row)");
  os << "; " << c.train.steps << " steps of " << c.train.batch_size << " sequences, lr " << shortest_double(c.train.lr)
     << ", seed " << c.train.seed;
  return os.str();
}

}  // namespace roformer::config
