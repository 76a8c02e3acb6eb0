// Loading a fine-tuning task's splits (see task_data.h).
#include "roformer/finetune/task_data.h"

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/finetune/glue_tsv.h"
#include "roformer/finetune/triplets.h"

namespace roformer::finetune {

TaskSpec task_spec(const config::FinetuneConfig& f) {
  TaskSpec s;
  if (f.task == config::FinetuneTask::triplets) {
    s.head = HeadKind::triplet;
    s.num_labels = 1;
    s.metrics = {"accuracy"};
    s.name = "triplets";
    s.bi_encoder = f.triplet_encoder == config::TripletEncoder::bi;
    s.scale = f.triplet_scale;
    return s;
  }
  if (f.task != config::FinetuneTask::glue)
    throw UserError("finetune.task is none; set it to glue or triplets in the task file");
  const GlueTask& g = glue_task(f.glue_task);
  s.head = g.regression() ? HeadKind::regression : HeadKind::classification;
  s.num_labels = g.regression() ? 1 : static_cast<int64_t>(g.labels.size());
  s.labels = g.labels;
  s.metrics = g.metrics;
  s.name = "glue/" + g.name;
  return s;
}

std::string split_path(const config::FinetuneConfig& f, const std::string& split, bool required) {
  if (f.data_dir.empty()) throw UserError("finetune.data_dir is empty; point it at the task's data directory");
  if (!is_directory(f.data_dir))
    throw UserError("finetune.data_dir '" + f.data_dir + "' is not a directory" +
                    (f.task == config::FinetuneTask::glue ? " (scripts/data/prepare_corpus.sh glue fetches GLUE)"
                                                          : " (scripts/data/make_doc_triplets.py makes triplets)"));
  std::string file = split + (f.task == config::FinetuneTask::glue ? ".tsv" : ".jsonl");
  if (f.task == config::FinetuneTask::glue && f.glue_task == "mnli" && split == "dev") file = "dev_matched.tsv";
  const std::string path = f.data_dir + "/" + file;
  if (path_exists(path)) {
    if (!is_regular_file(path)) throw UserError("'" + path + "' is not a regular file");
    return path;
  }
  if (!required) return "";
  throw UserError("'" + path + "' does not exist; the " + split + " split of " +
                  (f.task == config::FinetuneTask::glue ? "GLUE " + f.glue_task + " is " + file
                                                        : std::string("a triplet task is ") + file) +
                  " in finetune.data_dir");
}

namespace {

void add(TaskSplit& split, TaskExample ex) {
  for (const EncodedInput& in : ex.inputs) {
    split.truncated += in.truncated > 0;
    split.tokens += static_cast<int64_t>(in.ids.size());
  }
  split.examples.push_back(std::move(ex));
}

void load_glue(const config::FinetuneConfig& f, const data::Tokenizer& tok, int64_t limit, TaskSplit& split) {
  const GlueTask& g = glue_task(f.glue_task);
  GlueReadOptions options;
  options.skip_malformed = f.skip_malformed;
  const GlueSplit rows = read_glue_tsv(split.path, g, options);
  const bool pair = g.text_columns.size() == 2;
  for (const GlueExample& r : rows.examples) {
    if (limit > 0 && static_cast<int64_t>(split.examples.size()) >= limit) break;
    TaskExample ex;
    ex.inputs.push_back(pair ? encode_pair(tok, r.text_a, r.text_b, f.max_length)
                             : encode_single(tok, r.text_a, f.max_length));
    ex.label = r.label;
    ex.score = r.score;
    add(split, std::move(ex));
  }
}

void load_triplets(const config::FinetuneConfig& f, const data::Tokenizer& tok, int64_t limit, TaskSplit& split) {
  for (const Triplet& t : read_triplets(split.path)) {
    if (limit > 0 && static_cast<int64_t>(split.examples.size()) >= limit) break;
    TaskExample ex;
    if (f.triplet_encoder == config::TripletEncoder::bi) {
      for (const std::string* text : {&t.a, &t.b, &t.c}) ex.inputs.push_back(encode_single(tok, *text, f.max_length));
    } else {
      ex.inputs.push_back(encode_pair(tok, t.a, t.b, f.max_length));
      ex.inputs.push_back(encode_pair(tok, t.a, t.c, f.max_length));
    }
    ex.label = t.b_closer ? 0 : 1;
    add(split, std::move(ex));
  }
}

}  // namespace

TaskSplit load_split(const config::FinetuneConfig& f, const std::string& path, const data::Tokenizer& tokenizer,
                     int64_t max_examples) {
  TaskSplit split;
  split.path = path;
  if (f.task == config::FinetuneTask::glue)
    load_glue(f, tokenizer, max_examples, split);
  else
    load_triplets(f, tokenizer, max_examples, split);
  if (split.examples.empty())
    throw UserError(path + ": no examples; the split must hold at least one labelled example");
  return split;
}

}  // namespace roformer::finetune
