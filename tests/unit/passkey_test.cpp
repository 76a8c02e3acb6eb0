// Passkey task generator: exact prompt length, the key hidden where asked (at the filler
// sentence boundary nearest the requested depth), deterministic in the seed, question last;
// and the greedy evaluator counting exact matches.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "roformer/common/errors.h"
#include "roformer/eval/passkey.h"

namespace passkey_test {

using namespace roformer;

namespace {
std::string text(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) s.push_back(static_cast<char>(id));
  return s;
}
}  // namespace

TEST(Passkey, PlacesTheKeyAtTheRequestedDepth) {
  for (int64_t L : {256, 1000, 4096}) {
    for (double depth : {0.0, 0.25, 0.5, 0.75, 1.0}) {
      const eval::PasskeyPrompt p = eval::make_passkey_prompt(L, depth, 42);
      ASSERT_EQ(static_cast<int64_t>(p.ids.size()), L);
      const std::string s = text(p.ids);
      EXPECT_EQ(s.substr(static_cast<size_t>(p.key_position), 5), p.key);
      EXPECT_EQ(s.substr(s.size() - 38), "What is the pass key? The pass key is ");
      const std::string needle = "The pass key is " + p.key + ".";
      const size_t start = s.find(needle);
      ASSERT_NE(start, std::string::npos);
      EXPECT_EQ(s.find(needle, start + 1), std::string::npos);  // hidden once
      // Room for filler = L - needle sentence - question; the key sits within one filler
      // sentence (< 30 bytes) of depth * room.
      const double room =
          static_cast<double>(L) - 38.0 -
          static_cast<double>(("The pass key is " + p.key + ". Remember it. " + p.key + " is the pass key. ").size());
      EXPECT_LE(std::abs(static_cast<double>(start) - depth * room), 30.0) << "L=" << L << " depth=" << depth;
      if (depth == 0.0) {
        EXPECT_EQ(start, 0u);
      }
    }
  }
  const auto a = eval::make_passkey_prompt(512, 0.5, 7), b = eval::make_passkey_prompt(512, 0.5, 7),
             c = eval::make_passkey_prompt(512, 0.5, 8);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.key.size(), 5u);
  EXPECT_NE(a.key, c.key);
  EXPECT_THROW(eval::make_passkey_prompt(40, 0.5, 1), UserError);
}

TEST(Passkey, EvaluatorCountsTrialsAndRefusesMlm) {
  config::ModelConfig c;
  c.objective = config::Objective::causal_lm;
  c.vocab_size = 264;
  c.hidden_size = 16;
  c.num_heads = 2;
  c.num_layers = 1;
  c.ffn_size = 32;
  model::EncoderModel m = model::build_model(c, 1);
  const auto cells = eval::passkey_accuracy(m, {128, 256}, {0.0, 1.0}, 3, 5, torch::kCPU);
  ASSERT_EQ(cells.size(), 4u);
  for (const auto& cell : cells) {
    EXPECT_EQ(cell.trials, 3);
    EXPECT_EQ(cell.correct, 0);  // an untrained model does not guess five digits
  }
  c.objective = config::Objective::mlm;
  model::EncoderModel mlm = model::build_model(c, 1);
  EXPECT_THROW(eval::passkey_accuracy(mlm, {128}, {0.5}, 1, 5, torch::kCPU), UserError);
}

}  // namespace passkey_test
