// A tokenizer that runs in another process: roformer-prepare-data --tokenizer-service MODEL (a
// SentencePiece model) or Python with the `tokenizers` package (a Hugging Face tokenizer.json;
// the program is hf_tokenizer_service.h's), spoken to over a socket pair, one JSON line per request ({"encode": hex of
// the text} or
// {"decode": ids}) and per answer ({"ids": [...]}, {"text": hex} or {"error": message}). It is how a LibTorch process
// (fine-tuning) uses a SentencePiece model: SentencePiece and LibTorch export clashing protobuf symbols and cannot
// share a process (see tokenizer.h). The service's first line gives its name, vocabulary and special ids. Torch-free.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "roformer/common/line_child.h"
#include "roformer/data/tokenizer.h"

namespace roformer::data {

class ProcessTokenizer : public Tokenizer {
 public:
  // Starts `tool` (the roformer-prepare-data executable) serving `model_file`; throws
  // UserError when it cannot start or refuses the model (its message is passed on).
  ProcessTokenizer(const std::string& tool, const std::string& model_file);
  // Starts argv (argv[0] looked up on PATH when it has no '/'); `what` names the service in errors.
  ProcessTokenizer(const std::vector<std::string>& argv, const std::string& model_file, const std::string& what);
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
  void start(const std::vector<std::string>& argv, const std::string& model_file, const std::string& what);

  double wait_s_ = 120;  // helper_timeout_seconds(): its start and each answer
  std::unique_ptr<LineChild> child_;
  std::string name_;
  int64_t vocab_size_ = 0;
  std::map<std::string, int64_t> special_;
};

// The service loop run by roformer-prepare-data: reads requests from `in_fd`, answers on `out_fd`
// until end of input. Returns the process exit code.
int serve_tokenizer(const Tokenizer& tokenizer, int in_fd, int out_fd);

}  // namespace roformer::data
