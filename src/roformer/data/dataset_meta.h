// The prepared dataset's description (meta.json) and its validation (torch-free). A dataset
// directory holds meta.json plus, per split, binary shards of little-endian token ids
// (uint16 when the vocabulary fits, else uint32), each with its token count and CRC-32.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "roformer/data/document_index.h"

namespace roformer::data {

struct ShardInfo {
  std::string file;  // relative to the dataset directory
  int64_t tokens = 0;
  uint32_t crc32 = 0;
};

struct DatasetMeta {
  int format_version = 1;
  std::string tokenizer;        // "byte" or "sentencepiece"
  std::string tokenizer_model;  // sentencepiece: model file relative to the directory
  int64_t vocab_size = 0;
  int token_bytes = 2;  // 2 (uint16) or 4 (uint32)
  std::map<std::string, int64_t> special_ids;
  std::map<std::string, std::vector<ShardInfo>> splits;  // "train" / "valid" / "test"
  std::map<std::string, DocumentIndexInfo> documents;    // per split, when prepared with a separator

  int64_t split_tokens(const std::string& split) const;
  int64_t mask_id() const;  // [MASK]
  int64_t pad_id() const;   // [PAD]
};

// Reads and validates DIR/meta.json (structure, types, shard files present with the stated
// sizes). Throws UserError naming the file and the fix. With verify_checksums, also recomputes
// every shard's CRC-32.
DatasetMeta read_dataset_meta(const std::string& dir, bool verify_checksums = false);

// Refuses (UserError, naming the dataset and the fix) a dataset whose token ids reach past a
// model's embedding table: vocab_size above model_vocab_size.
void check_dataset_fits_model(const DatasetMeta& meta, const std::string& dir, int64_t model_vocab_size);

// Writes DIR/meta.json atomically (temporary file + rename).
void write_dataset_meta(const std::string& dir, const DatasetMeta& meta);

}  // namespace roformer::data
