// SentencePiece through the library on a small generated fixture: training, encode/decode
// round trip, special ids. Torch-free executable (SentencePiece never shares a process with
// LibTorch; see sentencepiece_tokenizer.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "roformer/common/files.h"
#include "roformer/data/sentencepiece_tokenizer.h"
#include "test_support.h"

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
