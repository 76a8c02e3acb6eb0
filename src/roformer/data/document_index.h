// Document boundaries of a prepared dataset (prepare-data --document-separator): per split, the
// token offset where each document starts, as little-endian int64 in SPLIT-documents.bin,
// listed in meta.json's "documents" with its count and CRC-32. Datasets prepared without a
// separator have none: their splits are one token stream (data.packing: stream). Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace roformer::data {

struct DocumentIndexInfo {
  std::string file;  // relative to the dataset directory
  int64_t count = 0;
  uint32_t crc32 = 0;
};

// Writes DIR/SPLIT-documents.bin from `starts` (strictly increasing, first 0).
DocumentIndexInfo write_document_starts(const std::string& dir, const std::string& split,
                                        const std::vector<int64_t>& starts);

// Reads and checks a split's document starts: the file's size and CRC-32, first 0, strictly
// increasing, every start inside the split's `tokens`. UserError naming the file otherwise.
std::vector<int64_t> read_document_starts(const std::string& dir, const DocumentIndexInfo& info, int64_t tokens);

// The document (index into starts) holding token `index`: the last start <= index.
int64_t document_of(const std::vector<int64_t>& starts, int64_t index);

}  // namespace roformer::data
