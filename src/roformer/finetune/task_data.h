// A fine-tuning task's examples, tokenised and ready to batch, whatever the source: a GLUE
// split (one input per example: a sentence or a sentence pair, with a class id or a score) or
// a triplet file (two inputs per example, (A, B) and (A, C), and which of B and C is closer).
// Also what the task is: its kind, its number of outputs and the metrics it reports.
// Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "roformer/config/config.h"
#include "roformer/data/tokenizer.h"
#include "roformer/finetune/pair_encoding.h"

namespace roformer::finetune {

enum class HeadKind { classification, regression, triplet };

struct TaskSpec {
  HeadKind head = HeadKind::classification;
  int64_t num_labels = 2;            // outputs of the head (1 for regression and triplet scores)
  std::vector<std::string> labels;   // class names (classification)
  std::vector<std::string> metrics;  // accuracy, f1, mcc, pearson, spearman
  std::string name;                  // "glue/sst2", "triplets"
  bool bi_encoder = false;           // triplets: A, B, C encoded apart (else the pairs (A,B), (A,C))
  double scale = 1.0;                // bi_encoder: score = scale * cosine
};

TaskSpec task_spec(const config::FinetuneConfig& finetune);

struct TaskExample {
  std::vector<EncodedInput> inputs;  // 1 (GLUE), 2 (triplets: (A,B) then (A,C)) or 3 (bi-encoder: A, B, C)
  int64_t label = 0;                 // class id; triplets: 0 when B is closer, 1 when C is
  double score = 0;                  // regression target
};

struct TaskSplit {
  std::string path;
  std::vector<TaskExample> examples;
  int64_t truncated = 0;  // inputs that lost tokens to max_length
  int64_t tokens = 0;     // tokens over all inputs
};

// The file of a split ("train", "dev" or "test") under finetune.data_dir; empty when an
// optional split (test) is absent. Throws UserError for a missing required split.
std::string split_path(const config::FinetuneConfig& finetune, const std::string& split, bool required);

// Reads and tokenises a split; throws UserError (file:line and fix) for anything unusable,
// including an empty split. `max_examples` > 0 keeps a prefix.
TaskSplit load_split(const config::FinetuneConfig& finetune, const std::string& path, const data::Tokenizer& tokenizer,
                     int64_t max_examples = 0);

}  // namespace roformer::finetune
