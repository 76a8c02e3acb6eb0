// GLUE tasks as the GLUE distribution lays them out (the TSV files `scripts/data/prepare_corpus.sh
// glue` fetches for users who are online): which columns hold the text and the label, the label
// names, and the metrics GLUE reports. The reader checks every row and names file, line and fix
// for a missing column, a short or long row, an unknown label or an empty split. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace roformer::finetune {

struct GlueTask {
  std::string name;                       // cola, sst2, mrpc, qqp, stsb, mnli, qnli, rte, wnli
  std::vector<std::string> text_columns;  // one (single sentence) or two (sentence pair)
  std::string label_column;
  std::vector<std::string> labels;   // class names in id order; empty for regression (STS-B)
  std::vector<std::string> metrics;  // what GLUE reports: accuracy, f1, mcc, pearson, spearman
  // CoLA's train/dev files have no header: text and label are found by position.
  bool headerless = false;
  int64_t text_position = -1, label_position = -1;
  bool regression() const { return labels.empty(); }
};

// The task called `name`; throws UserError listing the known ones.
const GlueTask& glue_task(const std::string& name);
std::vector<std::string> glue_task_names();

struct GlueExample {
  std::string text_a, text_b;  // text_b empty for single-sentence tasks
  int64_t label = -1;          // class id (classification)
  double score = 0;            // target (regression)
  int64_t line = 0;            // 1-based line in the file, for messages
};

struct GlueReadOptions {
  bool labelled = true;         // false: a test split (text only; CoLA's test file has a header)
  bool skip_malformed = false;  // skip rows with the wrong column count instead of refusing them
};

struct GlueSplit {
  std::vector<GlueExample> examples;
  int64_t skipped = 0;  // malformed rows skipped (only with skip_malformed)
};

// Reads one split. Throws UserError naming the file and line for anything it cannot use.
GlueSplit read_glue_tsv(const std::string& path, const GlueTask& task, const GlueReadOptions& options = {});

}  // namespace roformer::finetune
