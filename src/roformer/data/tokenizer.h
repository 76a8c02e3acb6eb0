// Tokenizers behind one interface (torch-free). The byte tokenizer maps every byte to its own
// id (0-255) and appends special tokens; the SentencePiece tokenizer lives in the separate
// roformer-prepare-data tool (sentencepiece_tokenizer.h) because Debian's SentencePiece and
// LibTorch both export protobuf symbols and must not share a process.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace roformer::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::string name() const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual std::vector<int64_t> encode(const std::string& text) const = 0;
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  // Special tokens by name ("[PAD]", "[MASK]", ...); MLM never selects these.
  virtual std::map<std::string, int64_t> special_ids() const = 0;
};

// 256 byte ids then [PAD] [MASK] [CLS] [SEP] [BOS] [EOS] [UNK] (ids 256..262): 263 ids.
// Round-trips any byte sequence, including invalid UTF-8. Models may pad their embedding
// table past 263 (the quickstart uses 264, a multiple of 8).
class ByteTokenizer : public Tokenizer {
 public:
  static constexpr int64_t kNumBytes = 256;
  std::string name() const override { return "byte"; }
  int64_t vocab_size() const override;
  std::vector<int64_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  std::map<std::string, int64_t> special_ids() const override;
};

}  // namespace roformer::data
