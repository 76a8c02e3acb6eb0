// GLUE task table and TSV reader (see glue_tsv.h). GLUE's files are tab-separated without
// quoting (quotes inside sentences are literal), so a row is split on tabs only.
#include "roformer/finetune/glue_tsv.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/common/strings.h"

namespace roformer::finetune {
namespace {

const std::vector<GlueTask>& tasks() {
  static const std::vector<GlueTask> table = [] {
    std::vector<GlueTask> t;
    GlueTask cola{"cola", {"sentence"}, "label", {"0", "1"}, {"mcc"}};
    cola.headerless = true;  // source, label, original annotation, sentence
    cola.text_position = 3;
    cola.label_position = 1;
    t.push_back(cola);
    t.push_back({"sst2", {"sentence"}, "label", {"0", "1"}, {"accuracy"}});
    t.push_back({"mrpc", {"#1 String", "#2 String"}, "Quality", {"0", "1"}, {"f1", "accuracy"}});
    t.push_back({"qqp", {"question1", "question2"}, "is_duplicate", {"0", "1"}, {"accuracy", "f1"}});
    t.push_back({"stsb", {"sentence1", "sentence2"}, "score", {}, {"pearson", "spearman"}});
    t.push_back(
        {"mnli", {"sentence1", "sentence2"}, "gold_label", {"contradiction", "entailment", "neutral"}, {"accuracy"}});
    t.push_back({"qnli", {"question", "sentence"}, "label", {"entailment", "not_entailment"}, {"accuracy"}});
    t.push_back({"rte", {"sentence1", "sentence2"}, "label", {"entailment", "not_entailment"}, {"accuracy"}});
    t.push_back({"wnli", {"sentence1", "sentence2"}, "label", {"0", "1"}, {"accuracy"}});
    return t;
  }();
  return table;
}

std::string where(const std::string& path, int64_t line) {
  return path + ":" + std::to_string(line);
}

// Column index of `name` in the header, or a UserError naming what the task's files have.
int64_t column_of(const std::vector<std::string>& header, const std::string& name, const std::string& path,
                  const GlueTask& task) {
  const auto it = std::find(header.begin(), header.end(), name);
  if (it != header.end()) return it - header.begin();
  throw UserError(where(path, 1) + ": the header has no column '" + name + "' (GLUE's " + task.name +
                  " files name their columns " + join(task.text_columns, ", ") + " and " + task.label_column +
                  "); is this the " + task.name + " file, with its header line?");
}

int64_t parse_label(const std::string& value, const GlueTask& task, const std::string& at) {
  const auto it = std::find(task.labels.begin(), task.labels.end(), value);
  if (it == task.labels.end())
    throw UserError(at + ": label '" + value + "' is not one of " + join(task.labels, ", ") + " (the " + task.name +
                    " labels); fix or remove the row");
  return it - task.labels.begin();
}

constexpr double kMaxScore = 1e9;

// A regression target. strtod's ERANGE on underflow (1e-320) is a number all the same; beyond
// +-1e9 the squared error overflows float32 in the loss (STS-B's scores lie in [0, 5]).
double parse_score(const std::string& value, const std::string& at) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(v) || (errno != 0 && std::fabs(v) > 1.0))
    throw UserError(at + ": score '" + value + "' is not a finite number; fix or remove the row");
  if (std::fabs(v) > kMaxScore)
    throw UserError(at + ": score '" + value + "' is beyond +-1e9 (STS-B scores lie in [0, 5]); fix or remove the row");
  return v;
}

}  // namespace

const GlueTask& glue_task(const std::string& name) {
  for (const GlueTask& t : tasks())
    if (t.name == name) return t;
  throw UserError("unknown GLUE task '" + name + "'; known: " + join(glue_task_names(), ", "));
}

std::vector<std::string> glue_task_names() {
  std::vector<std::string> names;
  for (const GlueTask& t : tasks()) names.push_back(t.name);
  return names;
}

GlueSplit read_glue_tsv(const std::string& path, const GlueTask& task, const GlueReadOptions& options) {
  std::istringstream in(read_text_file(path));
  std::string row;
  int64_t line = 0;
  GlueSplit out;
  const bool by_position = task.headerless && options.labelled;
  std::vector<int64_t> text_at;
  int64_t label_at = -1;
  size_t width = 0;
  if (by_position) {
    text_at = {task.text_position};
    label_at = task.label_position;
    width = 4;
  }
  while (std::getline(in, row)) {
    ++line;
    if (!row.empty() && row.back() == '\r') row.pop_back();
    if (trim(row).empty()) continue;
    const std::vector<std::string> cells = split(row, '\t');
    if (width == 0) {  // the header
      width = cells.size();
      for (const std::string& c : task.text_columns) text_at.push_back(column_of(cells, c, path, task));
      if (options.labelled) label_at = column_of(cells, task.label_column, path, task);
      continue;
    }
    if (cells.size() != width) {
      if (options.skip_malformed) {
        ++out.skipped;
        continue;
      }
      throw UserError(where(path, line) + ": " + std::to_string(cells.size()) + " tab-separated fields where the " +
                      (by_position ? std::string("task has ") : std::string("header has ")) + std::to_string(width) +
                      " (a tab inside a sentence, or a cut-off row?); fix or remove the row");
    }
    GlueExample e;
    e.line = line;
    e.text_a = cells[static_cast<size_t>(text_at[0])];
    if (text_at.size() > 1) e.text_b = cells[static_cast<size_t>(text_at[1])];
    if (options.labelled) {
      const std::string& value = cells[static_cast<size_t>(label_at)];
      if (task.regression())
        e.score = parse_score(value, where(path, line));
      else
        e.label = parse_label(value, task, where(path, line));
    }
    out.examples.push_back(std::move(e));
  }
  if (out.examples.empty())
    throw UserError(path + ": no examples" + (out.skipped ? " (every row was malformed and skipped)" : "") +
                    "; is this the right file for " + task.name + "?");
  return out;
}

}  // namespace roformer::finetune
