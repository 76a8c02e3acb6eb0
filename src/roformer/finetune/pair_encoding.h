// Model inputs for fine-tuning: one text or a sentence pair as BERT/RoFormer lay them out,
// [CLS] a [SEP] (b [SEP]), token types 0 for the first segment and 1 for the second, cut to a
// maximum length by removing tokens from the end of the longer text first (Hugging Face's
// "longest_first" truncation). Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "roformer/data/tokenizer.h"

namespace roformer::finetune {

struct EncodedInput {
  std::vector<int64_t> ids;          // [CLS] a [SEP] (b [SEP])
  std::vector<int64_t> token_types;  // 0 through the first [SEP], then 1
  int64_t truncated = 0;             // tokens removed to fit max_length
};

// `tokenizer` must have [CLS] and [SEP]; max_length must leave room for at least one token of
// each text (4 for a pair, 3 for a single text). Throws UserError otherwise.
EncodedInput encode_pair(const data::Tokenizer& tokenizer, const std::string& a, const std::string& b,
                         int64_t max_length);
EncodedInput encode_single(const data::Tokenizer& tokenizer, const std::string& a, int64_t max_length);

// The same from token ids already produced by a tokenizer.
EncodedInput encode_ids(std::vector<int64_t> a, std::vector<int64_t> b, bool pair, int64_t cls, int64_t sep,
                        int64_t max_length);

}  // namespace roformer::finetune
