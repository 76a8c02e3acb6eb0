// SentencePiece tokenizer (training and encoding) for roformer-prepare-data only: Debian's
// libsentencepiece carries its own protobuf, which clashes with LibTorch's exported protobuf
// symbols, so this never links into roformer_core.
#pragma once

#include <cstddef>
#include <memory>

#include "roformer/data/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace roformer::data {

// A model file larger than this is refused (ours are a few hundred KiB; 1M pieces fit in 64 MiB).
constexpr size_t kMaxSentencePieceModelBytes = size_t{64} << 20;

class SentencePieceTokenizer : public Tokenizer {
 public:
  // Trains a model on `train_file` and writes `model_prefix`.model / .vocab.
  static void train(const std::string& train_file, const std::string& model_prefix, int64_t vocab_size,
                    const std::string& model_type);

  explicit SentencePieceTokenizer(const std::string& model_file);
  ~SentencePieceTokenizer() override;

  std::string name() const override { return "sentencepiece"; }
  int64_t vocab_size() const override;
  std::vector<int64_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  std::map<std::string, int64_t> special_ids() const override;

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace roformer::data
