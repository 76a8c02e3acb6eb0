// Segments, positions and rows of document packing (see document_packing.h).
#include "roformer/data/document_packing.h"

#include <algorithm>

namespace roformer::data {

std::vector<int64_t> document_starts_in_row(const std::vector<int64_t>& starts, int64_t start, int64_t n) {
  std::vector<int64_t> out{0};
  auto it = std::upper_bound(starts.begin(), starts.end(), start);  // the first start after the row's first token
  for (; it != starts.end() && *it < start + n; ++it) out.push_back(*it - start);
  return out;
}

void fill_document_pieces(const std::vector<int64_t>& row_starts, int64_t L, int64_t* segments, int64_t* positions) {
  int64_t piece = 0;
  for (int64_t p = 0; p < L; ++p) {
    while (piece + 1 < static_cast<int64_t>(row_starts.size()) && row_starts[static_cast<size_t>(piece + 1)] <= p)
      ++piece;
    segments[p] = piece;
    positions[p] = p - row_starts[static_cast<size_t>(piece)];
  }
}

bool next_token_starts_document(const std::vector<int64_t>& row_starts, int64_t p) {
  return std::binary_search(row_starts.begin() + 1, row_starts.end(), p + 1);
}

DocumentSpan document_span(const std::vector<int64_t>& starts, int64_t total, int64_t d) {
  const auto i = static_cast<size_t>(d);
  const int64_t end = i + 1 < starts.size() ? starts[i + 1] : total;
  return {starts[i], end - starts[i]};
}

int64_t document_row_inputs(int64_t document_tokens, int64_t L, bool causal) {
  const int64_t usable = causal ? document_tokens - 1 : document_tokens;
  return std::clamp<int64_t>(usable, 1, L);
}

}  // namespace roformer::data
