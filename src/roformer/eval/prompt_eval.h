// `roformer eval MODEL --prompts FILE`: a model scored on prompts in its own tokens (RULER's
// needles and variable tracking from scripts/data/make_ruler_prompts.py). Each prompt runs whole
// and teacher-forced: an answer token is right when it is the model's top prediction given every
// token before it, so a prompt is an exact match exactly when greedy decoding would write its
// answer first. Results by nominal length and by depth, with every prompt's predicted tokens.
#pragma once

#include <string>
#include <vector>

#include "roformer/eval/extrapolation.h"
#include "roformer/eval/prompt_file.h"

namespace roformer::eval {

struct PromptScore {
  int64_t length = 0;  // nominal
  double depth = 0;
  int64_t tokens = 0;              // ids in the prompt, answer included
  int64_t answer_tokens = 0;       // of them, scored
  int64_t right = 0;               // answer tokens predicted
  double loss = 0;                 // mean negative log-likelihood of the answer tokens
  std::vector<int64_t> predicted;  // the top prediction at each answer token
  bool exact() const { return right == answer_tokens; }
};

struct PromptReport {
  std::string checkpoint, task, haystack, position, methods, precision;
  int64_t train_length = 0;
  std::vector<PromptScore> prompts;  // in the file's order
};

// Scores every prompt of `set` with the loaded checkpoint (eval.precision as for eval).
PromptReport score_prompts(LoadedCheckpoint& loaded, const PromptSet& set, const std::string& checkpoint);

std::string prompt_report_table(const PromptReport& report);  // exact match by length and depth
std::string prompt_report_json(const PromptReport& report);

}  // namespace roformer::eval
