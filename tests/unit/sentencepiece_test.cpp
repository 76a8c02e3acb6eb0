// SentencePiece through the library on a small generated fixture: training, encode/decode
// round trip, special ids. Torch-free executable (SentencePiece never shares a process with
// LibTorch; see sentencepiece_tokenizer.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/data/sentencepiece_tokenizer.h"
#include "roformer/data/tokenizer_process.h"
#include "test_support.h"

namespace sentencepiece_test {

using namespace roformer;

TEST(SentencePiece, TrainsEncodesAndRoundTrips) {
  roformer::testing::TempDir dir;
  const std::vector<std::string> words{"kernel", "memory",    "driver",    "page",   "table",  "lock",  "the",   "a",
                                       "of",     "scheduler", "interrupt", "device", "buffer", "queue", "thread"};
  std::mt19937 rng(3);
  std::string corpus;
  for (int line = 0; line < 3000; ++line) {
    for (int w = 0; w < 8; ++w) corpus += (w ? " " : "") + words[rng() % words.size()];
    corpus += ".\n";
  }
  roformer::testing::write_file(dir.file("train.txt"), corpus);
  data::SentencePieceTokenizer::train(dir.file("train.txt"), dir.file("spm"), 400, "bpe");  // 256 byte pieces + merges
  data::SentencePieceTokenizer sp(dir.file("spm.model"));
  EXPECT_EQ(sp.vocab_size(), 400);
  const std::string sentence = "the scheduler of the device driver takes a lock.";
  const auto ids = sp.encode(sentence);
  EXPECT_LT(ids.size(), sentence.size() / 2);  // merges happened
  EXPECT_EQ(sp.decode(ids), sentence);
  const auto specials = sp.special_ids();
  EXPECT_EQ(specials.at("[PAD]"), 0);
  EXPECT_EQ(specials.at("[EOS]"), 3);
  EXPECT_GT(specials.at("[MASK]"), 3);
  const auto masked = sp.encode("a [MASK] b");  // the user-defined symbol stays one piece
  EXPECT_NE(std::find(masked.begin(), masked.end(), specials.at("[MASK]")), masked.end());
  // Byte fallback: characters never seen still round-trip.
  EXPECT_EQ(sp.decode(sp.encode("zzz \xc3\xa9")), "zzz \xc3\xa9");
}

// The out-of-process tokenizer (what `roformer finetune` uses for SentencePiece checkpoints)
// gives exactly what the in-process tokenizer gives, for text with newlines, tabs, quotes,
// special symbols and invalid UTF-8; an unreadable model is refused with the service's reason.
TEST(SentencePiece, TheTokenizerServiceEncodesAsTheLibraryDoes) {
  roformer::testing::TempDir dir;
  std::string corpus;
  for (int line = 0; line < 2000; ++line)
    corpus += "the page table of the device driver " + std::to_string(line % 7) + ".\n";
  roformer::testing::write_file(dir.file("train.txt"), corpus);
  data::SentencePieceTokenizer::train(dir.file("train.txt"), dir.file("spm"), 300, "bpe");
  const data::SentencePieceTokenizer local(dir.file("spm.model"));
  std::string tool = roformer::testing::roformer_binary();
  tool = tool.substr(0, tool.find_last_of('/')) + "/roformer-prepare-data";
  const data::ProcessTokenizer remote(tool, dir.file("spm.model"));
  EXPECT_EQ(remote.name(), "sentencepiece");
  EXPECT_EQ(remote.vocab_size(), local.vocab_size());
  EXPECT_EQ(remote.special_ids(), local.special_ids());
  for (const std::string& text : std::vector<std::string>{"the page table", "line one\nline \"two\"\tand [CLS] [SEP]",
                                                          "", "bad \xff\xfe utf-8", std::string(20000, 'x')})
    EXPECT_EQ(remote.encode(text), local.encode(text)) << text.substr(0, 40);
  const auto ids = local.encode("the device driver");
  EXPECT_EQ(remote.decode(ids), local.decode(ids));
  roformer::testing::write_file(dir.file("broken.model"), "not a model");
  EXPECT_THROW(data::ProcessTokenizer(tool, dir.file("broken.model")), roformer::UserError);
}

}  // namespace sentencepiece_test
