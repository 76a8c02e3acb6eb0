// A tokenizer that runs in another process: roformer-prepare-data --tokenizer-service MODEL,
// spoken to over a socket pair, one JSON line per request ({"encode": hex of the text} or
// {"decode": ids}) and per answer ({"ids": [...]}, {"text": hex} or {"error": message}). It is how a LibTorch process
// (fine-tuning) uses a SentencePiece model: SentencePiece and LibTorch export clashing protobuf symbols and cannot
// share a process (see tokenizer.h). The service's first line gives its name, vocabulary and special ids. Torch-free.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "roformer/data/tokenizer.h"

namespace roformer::data {

class ProcessTokenizer : public Tokenizer {
 public:
  // Starts `tool` (the roformer-prepare-data executable) serving `model_file`; throws
  // UserError when it cannot start or refuses the model (its message is passed on).
  ProcessTokenizer(const std::string& tool, const std::string& model_file);
  ~ProcessTokenizer() override;
  ProcessTokenizer(const ProcessTokenizer&) = delete;
  ProcessTokenizer& operator=(const ProcessTokenizer&) = delete;

  std::string name() const override { return name_; }
  int64_t vocab_size() const override { return vocab_size_; }
  std::vector<int64_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  std::map<std::string, int64_t> special_ids() const override { return special_; }

 private:
  std::string request(const std::string& line) const;  // one line out, one line back

  int fd_ = -1;
  pid_t pid_ = -1;
  std::string name_;
  int64_t vocab_size_ = 0;
  std::map<std::string, int64_t> special_;
  mutable std::string buffer_;  // bytes read past the last answer
};

// The service loop run by roformer-prepare-data: reads requests from `in_fd`, answers on `out_fd`
// until end of input. Returns the process exit code.
int serve_tokenizer(const Tokenizer& tokenizer, int in_fd, int out_fd);

}  // namespace roformer::data
