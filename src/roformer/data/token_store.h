// Read-only view of one split's token ids, memory-mapped from its shard files and addressed
// as one array across shard boundaries. Torch-free. Opening checks every id against the
// vocabulary, so a corrupted or foreign shard is refused up front.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "roformer/data/dataset_meta.h"

namespace roformer::data {

class TokenStore {
 public:
  // With `documents` false the split's document index is not read (a stream of tokens needs none,
  // and a damaged index does not stop it); document_starts() is then empty.
  TokenStore(const std::string& dir, const DatasetMeta& meta, const std::string& split, bool documents = true);
  ~TokenStore();
  TokenStore(const TokenStore&) = delete;
  TokenStore& operator=(const TokenStore&) = delete;

  int64_t size() const { return total_; }
  const std::string& split() const { return split_; }
  int64_t at(int64_t index) const;
  // Copies tokens [begin, begin + n) into out.
  void read(int64_t begin, int64_t n, int64_t* out) const;
  // Where each document starts (a dataset prepared with --document-separator), or empty: the
  // split is one token stream without recorded boundaries.
  const std::vector<int64_t>& document_starts() const { return document_starts_; }

 private:
  struct Mapped {
    const unsigned char* data = nullptr;
    size_t bytes = 0;
    int64_t first = 0;  // global index of the shard's first token
    int64_t tokens = 0;
  };
  std::string split_;
  int token_bytes_;
  int64_t total_ = 0;
  std::vector<Mapped> shards_;
  std::vector<int64_t> document_starts_;
};

}  // namespace roformer::data
