// Writes a prepared dataset: tokenizes split files into binary shards (uint16 or uint32
// little-endian ids) with CRC-32s and a meta.json, building everything in a temporary
// directory that is renamed into place at the end. Torch-free (runs inside
// roformer-prepare-data).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace roformer::data {

struct PrepareOptions {
  std::vector<std::string> inputs;  // split name = file stem: train.txt -> "train"
  std::string tokenizer = "byte";   // byte | sentencepiece
  int64_t vocab_size = 8000;        // sentencepiece only
  std::string model_type = "bpe";   // sentencepiece: bpe | unigram
  std::string out;
  int64_t shard_tokens = 64 << 20;  // tokens per shard file
  bool force = false;               // replace an existing dataset directory
  // A line equal to this (without its line break) ends a document and is not tokenized; the
  // document starts are recorded (document_index.h). Empty: no documents, one token stream.
  std::string document_separator;
};

struct PrepareReport {
  int64_t vocab_size = 0;
  std::vector<std::pair<std::string, int64_t>> tokens_per_split;
  std::vector<std::pair<std::string, int64_t>> documents_per_split;  // with a document separator
  double seconds = 0;
};

// Throws UserError for bad inputs (missing/empty files, duplicate splits, no train split,
// existing output without force); on any failure nothing is left under `out`.
PrepareReport prepare_dataset(const PrepareOptions& options);

}  // namespace roformer::data
