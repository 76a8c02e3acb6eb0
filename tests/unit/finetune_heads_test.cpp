// Fine-tuning heads and inputs against hand-computed references: the classification head's
// [CLS] -> dense -> activation -> out_proj written with loops in double, each loss written
// from its definition, and sentence-pair encoding with longest-first truncation on the byte
// tokenizer.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <set>

#include "roformer/common/errors.h"
#include "roformer/data/tokenizer.h"
#include "roformer/finetune/heads.h"
#include "roformer/finetune/pair_encoding.h"

namespace finetune_heads_test {

using namespace roformer;
using namespace roformer::finetune;

namespace {
const auto kDouble = torch::TensorOptions().dtype(torch::kFloat64);
}  // namespace

TEST(FinetuneHeads, ClassificationHeadIsDenseActivationOutProjOnTheFirstToken) {
  for (auto act : {config::Activation::gelu, config::Activation::relu}) {
    torch::manual_seed(3);
    ClassificationHead head(4, 3, 0.1, act);
    head->to(torch::kFloat64);
    head->eval();  // dropout off
    const torch::Tensor h = torch::randn({2, 5, 4}, kDouble);
    const torch::Tensor got = head->forward(h);
    ASSERT_EQ(got.sizes(), (std::vector<int64_t>{2, 3}));
    auto W1 = head->dense->weight.accessor<double, 2>(), W2 = head->out_proj->weight.accessor<double, 2>();
    auto b1 = head->dense->bias.accessor<double, 1>(), b2 = head->out_proj->bias.accessor<double, 1>();
    auto x = h.accessor<double, 3>();
    for (int64_t b = 0; b < 2; ++b) {
      double mid[4];
      for (int64_t i = 0; i < 4; ++i) {
        double z = b1[i];
        for (int64_t j = 0; j < 4; ++j) z += W1[i][j] * x[b][0][j];  // token 0 only
        mid[i] = act == config::Activation::relu ? std::max(z, 0.0) : 0.5 * z * (1 + std::erf(z / std::sqrt(2.0)));
      }
      for (int64_t c = 0; c < 3; ++c) {
        double y = b2[c];
        for (int64_t i = 0; i < 4; ++i) y += W2[c][i] * mid[i];
        EXPECT_NEAR(got[b][c].item<double>(), y, 1e-12);
      }
    }
    // Later tokens do not matter.
    torch::Tensor other = h.clone();
    other.narrow(1, 1, 4).normal_();
    EXPECT_TRUE(torch::allclose(head->forward(other), got, 0, 0));
  }
  std::set<std::string> names;
  for (const auto& p : ClassificationHead(4, 2, 0.0, config::Activation::gelu)->named_parameters())
    names.insert(p.key());
  EXPECT_EQ(names, (std::set<std::string>{"dense.weight", "dense.bias", "out_proj.weight", "out_proj.bias"}));
}

TEST(FinetuneHeads, LossesEqualTheirDefinitions) {
  const torch::Tensor logits = torch::tensor({{1.0, 2.0, 0.5}, {0.0, -1.0, 3.0}}, kDouble);
  const torch::Tensor labels = torch::tensor({1, 0}, torch::kLong);
  // -log softmax at the label, averaged: row 0 label 1, row 1 label 0.
  const double l0 = -2.0 + std::log(std::exp(1.0) + std::exp(2.0) + std::exp(0.5));
  const double l1 = -0.0 + std::log(std::exp(0.0) + std::exp(-1.0) + std::exp(3.0));
  EXPECT_NEAR(classification_loss(logits, labels).item<double>(), (l0 + l1) / 2, 1e-12);

  const torch::Tensor pred = torch::tensor({{2.5}, {4.0}}, kDouble), gold = torch::tensor({3.0, 1.0}, kDouble);
  EXPECT_NEAR(regression_loss(pred, gold).item<double>(), (0.25 + 9.0) / 2, 1e-12);

  const torch::Tensor ab = torch::tensor({2.0, 0.5}, kDouble), ac = torch::tensor({1.0, 1.5}, kDouble);
  const torch::Tensor b_closer = torch::tensor({true, false});
  // Softmax over (s_AB, s_AC) with the closer one as the class: row 0 B (2 vs 1), row 1 C (1.5 vs 0.5).
  const double s0 = -2.0 + std::log(std::exp(2.0) + std::exp(1.0)), s1 = -1.5 + std::log(std::exp(0.5) + std::exp(1.5));
  EXPECT_NEAR(triplet_loss(ab, ac, b_closer, TripletLoss::softmax).item<double>(), (s0 + s1) / 2, 1e-12);
  // Margin 1.5: max(0, 1.5 - (2 - 1)) = 0.5 and max(0, 1.5 - (1.5 - 0.5)) = 0.5.
  EXPECT_NEAR(triplet_loss(ab, ac, b_closer, TripletLoss::margin, 1.5).item<double>(), 0.5, 1e-12);
  EXPECT_NEAR(triplet_loss(ab, ac, b_closer, TripletLoss::margin, 0.5).item<double>(), 0.0, 1e-12);
}

TEST(FinetuneInputs, PairEncodingWithLongestFirstTruncation) {
  data::ByteTokenizer bytes;
  const int64_t cls = bytes.special_ids().at("[CLS]"), sep = bytes.special_ids().at("[SEP]");
  const EncodedInput pair = encode_pair(bytes, "ab", "xyz", 16);
  EXPECT_EQ(pair.ids, (std::vector<int64_t>{cls, 'a', 'b', sep, 'x', 'y', 'z', sep}));
  EXPECT_EQ(pair.token_types, (std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(pair.truncated, 0);
  // Budget 7 - 3 = 4 of 2 + 5 tokens: the longer text loses its last tokens first (5 -> 4 -> 3 -> 2).
  const EncodedInput cut = encode_pair(bytes, "ab", "vwxyz", 7);
  EXPECT_EQ(cut.ids, (std::vector<int64_t>{cls, 'a', 'b', sep, 'v', 'w', sep}));
  EXPECT_EQ(cut.truncated, 3);
  // Equal lengths: the first text gives way first, then they alternate.
  EXPECT_EQ(encode_pair(bytes, "abc", "xyz", 7).ids, (std::vector<int64_t>{cls, 'a', 'b', sep, 'x', 'y', sep}));
  const EncodedInput single = encode_single(bytes, "hello", 5);
  EXPECT_EQ(single.ids, (std::vector<int64_t>{cls, 'h', 'e', 'l', sep}));
  EXPECT_EQ(single.token_types, (std::vector<int64_t>(5, 0)));
  EXPECT_THROW(encode_pair(bytes, "a", "b", 4), UserError);  // no room for one token of each
}

}  // namespace finetune_heads_test
