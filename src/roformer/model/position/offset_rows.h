// Score rows from a table of offsets: a family whose score bias depends on key - query alone
// (T5, ALiBi, KERPLE, Sandwich; DeBERTa's and Transformer-XL's per-offset terms) hands over one
// row per head, [H, 2S - 1], and any block of query rows [begin, end) is a Toeplitz slice of it.
// Used by the attention mask (model/attention_mask.h) and the relative terms of this folder.
#pragma once

#include <torch/types.h>

#include <cstdint>

namespace roformer::model {

// Query rows [begin, end) of the Toeplitz bias in `table` ([H, 2S - 1], the bias for
// key - query = d in column d + S - 1), for the keys [0, keys) (keys <= S; -1: all S):
// [H, end - begin, keys], contiguous, with out[h, r, j] = table[h, j - (begin + r) + S - 1].
torch::Tensor toeplitz_rows(const torch::Tensor& table, int64_t begin, int64_t end, int64_t keys = -1);

}  // namespace roformer::model
