// SentencePiece training and encoding through the library (see sentencepiece_tokenizer.h).
// Ids 0-3 are [PAD] [UNK] [BOS] [EOS]; [MASK] [CLS] [SEP] are user-defined symbols; byte
// fallback keeps every input representable.
#include "roformer/data/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <thread>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"

namespace roformer::data {

void SentencePieceTokenizer::train(const std::string& train_file, const std::string& model_prefix, int64_t vocab_size,
                                   const std::string& model_type) {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const std::string args = "--input=" + train_file + " --model_prefix=" + model_prefix +
                           " --vocab_size=" + std::to_string(vocab_size) + " --model_type=" + model_type +
                           " --character_coverage=1.0 --byte_fallback=true --pad_id=0 --unk_id=1 --bos_id=2"
                           " --eos_id=3 --user_defined_symbols=[MASK],[CLS],[SEP] --input_sentence_size=2000000"
                           " --shuffle_input_sentence=true --max_sentence_length=16384 --minloglevel=2"
                           " --num_threads=" +
                           std::to_string(threads);
  const auto status = sentencepiece::SentencePieceTrainer::Train(args);
  if (!status.ok())
    throw UserError(
        "SentencePiece training on '" + train_file + "' failed: " + status.ToString() +
        "; --vocab-size must exceed the 256 byte-fallback pieces plus the characters seen, and not exceed what "
        "the text can supply");
}

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_file)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  // Read through read_text_file (a regular file of bounded size): SentencePiece's own Load would
  // block on a FIFO and read /dev/zero without end.
  const std::string bytes = read_text_file(model_file, kMaxSentencePieceModelBytes);
  const auto status = sp_->LoadFromSerializedProto(bytes);
  if (!status.ok()) throw UserError("cannot load SentencePiece model '" + model_file + "': " + status.ToString());
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

int64_t SentencePieceTokenizer::vocab_size() const {
  return sp_->GetPieceSize();
}

std::vector<int64_t> SentencePieceTokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  sp_->Encode(text, &ids);
  return {ids.begin(), ids.end()};
}

std::string SentencePieceTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  sp_->Decode(std::vector<int>(ids.begin(), ids.end()), &out);
  return out;
}

std::map<std::string, int64_t> SentencePieceTokenizer::special_ids() const {
  std::map<std::string, int64_t> m{{"[PAD]", 0}, {"[UNK]", 1}, {"[BOS]", 2}, {"[EOS]", 3}};
  for (const char* name : {"[MASK]", "[CLS]", "[SEP]"}) m[name] = sp_->PieceToId(name);
  return m;
}

}  // namespace roformer::data
