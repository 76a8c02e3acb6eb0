// Passkey retrieval (Mohtashami & Jaggi 2023, used across the context-extension literature):
// a random 5-digit number is hidden at a chosen depth inside filler text of a given length,
// and a causal model must continue "What is the pass key? The pass key is" with it. Accuracy
// by length and depth shows whether a model uses positions beyond its training length.
// Byte-level datasets only (the prompt is built from bytes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "roformer/model/encoder.h"

namespace roformer::eval {

struct PasskeyPrompt {
  std::vector<int64_t> ids;     // the whole prompt, exactly `length` tokens
  std::string key;              // the digits
  int64_t key_position = 0;     // index of the first digit of the hidden key sentence's number
  std::vector<int64_t> answer;  // ids the model must generate
};

// A prompt of exactly `length` byte tokens with the key sentence starting at the filler
// boundary nearest to depth * (room for filler); depth in [0, 1]. Deterministic in seed.
PasskeyPrompt make_passkey_prompt(int64_t length, double depth, uint64_t seed);

struct PasskeyCell {
  int64_t length = 0;
  double depth = 0;
  int64_t trials = 0, correct = 0;
};

// Greedy-decodes the answer for `trials` prompts per (length, depth); exact-match accuracy.
std::vector<PasskeyCell> passkey_accuracy(model::EncoderModel& model, const std::vector<int64_t>& lengths,
                                          const std::vector<double>& depths, int64_t trials, uint64_t seed,
                                          const torch::Device& device);

}  // namespace roformer::eval
