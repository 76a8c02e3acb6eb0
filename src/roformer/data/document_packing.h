// What data.packing adds to a training row (config.h's DataPacking): under `documents`, which
// document of the row each token belongs to and its position inside that document (restarting
// at the row's start too, as a document cut by the row begins there); under `none`, one
// document per row from its start, cut at the row's length and padded. Pure functions of the
// corpus's document starts (document_index.h), so batches stay functions of the step. Torch-free.
#pragma once

#include <cstdint>
#include <vector>

namespace roformer::data {

// The row-relative indices where a document starts in the `n` tokens from `start`: 0 first
// (the row's first token starts its own piece), then every recorded start inside the row.
std::vector<int64_t> document_starts_in_row(const std::vector<int64_t>& starts, int64_t start, int64_t n);

// Fills segments[0, L) (0 for the row's first piece, then 1, 2, ...) and positions[0, L) (the
// distance to the piece's first token) from document_starts_in_row's result.
void fill_document_pieces(const std::vector<int64_t>& row_starts, int64_t L, int64_t* segments, int64_t* positions);

// True when row index p + 1 starts a document: a causal target there would predict the next
// document's first token from the previous one, so it is not scored.
bool next_token_starts_document(const std::vector<int64_t>& row_starts, int64_t p);

// One document as a `none` row: its tokens [begin, begin + tokens) of the split.
struct DocumentSpan {
  int64_t begin = 0, tokens = 0;
};
// Document d of `starts` in a split of `total` tokens.
DocumentSpan document_span(const std::vector<int64_t>& starts, int64_t total, int64_t d);

// Tokens of a `none` row that are inputs (the rest is padding): the document's first L, or
// for causal LM its first L that have a next token (at least one, so no row is empty).
int64_t document_row_inputs(int64_t document_tokens, int64_t L, bool causal);

}  // namespace roformer::data
