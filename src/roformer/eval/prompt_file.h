// The prompt files of `roformer eval --prompts` (scripts/data/make_ruler_prompts.py writes them):
// RULER-style prompts already in a model's token ids, each with the position where its answer
// starts; the answer is the rest of the prompt. Needs no LibTorch, so it is tested and fuzzed on
// its own; prompt_eval.cpp scores the prompts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace roformer::eval {

struct Prompt {
  int64_t length = 0;        // the nominal length it was built for (the ids are at most this many)
  double depth = 0;          // where its needle sits, in [0, 1]
  int64_t answer_start = 0;  // ids[answer_start:] are the answer, predicted from the ids before each
  std::vector<int64_t> ids;
};

struct PromptSet {
  std::string task, haystack, tokenizer;  // what built it (metadata; task e.g. "niah_single")
  std::vector<Prompt> prompts;
};

// Parses a prompt file's text; a bad input throws UserError naming `source`, the prompt and the
// field (format tag, ids outside [0, vocab), an answer that starts at 0 or past the ids, ids
// longer than their nominal length, a depth outside [0, 1]).
PromptSet parse_prompt_set(const std::string& json_text, const std::string& source, int64_t vocab);

}  // namespace roformer::eval
