// The token scores evaluation reads off the logits (ops/token_scores): on the CPU's float32 and
// bfloat16 rows, the loss against log_softmax in double of the same values and the argmax against
// at::argmax, for vocabularies around the kernel's vector width, large and infinite logits, ties
// and NaN rows; double logits through the ATen path; and eval::score_tokens's row chunks against
// one chunk.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "model_cases.h"
#include "roformer/eval/evaluate.h"
#include "roformer/ops/token_scores/token_scores.h"

namespace token_scores_test {

using namespace roformer;

// The reference: log_softmax in double of the very values the kernel reads.
void expect_like_double(const torch::Tensor& logits, const torch::Tensor& gold, double tolerance) {
  const ops::TokenScores s = ops::token_scores(logits, gold);
  const torch::Tensor exact = logits.to(torch::kFloat64);
  const torch::Tensor want = -torch::log_softmax(exact, -1).gather(1, gold.unsqueeze(1)).squeeze(1);
  ASSERT_EQ(s.nll.scalar_type(), torch::kFloat64);
  const torch::Tensor finite = torch::isfinite(want);
  EXPECT_TRUE(torch::equal(finite, torch::isfinite(s.nll)));
  EXPECT_TRUE(torch::equal(torch::isnan(want), torch::isnan(s.nll)));
  EXPECT_TRUE(torch::equal(want.masked_select(torch::isinf(want)), s.nll.masked_select(torch::isinf(want))));
  if (finite.any().item<bool>()) {
    EXPECT_LT((s.nll - want).masked_select(finite).abs().max().item<double>(), tolerance);
  }
  EXPECT_TRUE(torch::equal(s.argmax, exact.argmax(-1)));
}

TEST(TokenScores, EqualLogSoftmaxInDoubleOfTheSameValues) {
  torch::manual_seed(4);
  for (const int64_t V : {1L, 7L, 8L, 9L, 300L, 4099L}) {
    for (const double scale : {1.0, 30.0, 1e4}) {
      for (const auto dtype : {torch::kFloat32, torch::kBFloat16}) {
        SCOPED_TRACE("V " + std::to_string(V) + ", scale " + std::to_string(scale) + ", " + c10::toString(dtype));
        const torch::Tensor logits = (torch::randn({13, V}) * scale).to(dtype);
        const torch::Tensor gold = torch::randint(0, V, {13}, torch::kLong);
        // Float's exponential summed in double: about float's rounding of log(sum).
        expect_like_double(logits, gold, 2e-6);
      }
    }
  }
}

TEST(TokenScores, InfinitiesTiesAndNanRowsAsAtenHasThem) {
  torch::Tensor logits = torch::randn({5, 37});
  const float inf = std::numeric_limits<float>::infinity();
  logits.index_put_({0, torch::indexing::Slice(0, 30)}, -inf);  // most of a row impossible
  logits.index_put_({1, 3}, -inf);                              // the gold impossible: an infinite loss
  logits.index_put_({2, 5}, 9.0f);                              // a tie: the first index wins
  logits.index_put_({2, 20}, 9.0f);
  logits.index_put_({3, 11}, std::nanf(""));  // NaN: the loss is NaN, the argmax the NaN's index
  logits.index_put_({3, 30}, std::nanf(""));
  const torch::Tensor gold = torch::tensor({31L, 3L, 5L, 0L, 36L});
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16}) expect_like_double(logits.to(dtype), gold, 2e-6);
  EXPECT_EQ(ops::token_scores(logits, gold).argmax[2].item<int64_t>(), 5);
  EXPECT_EQ(ops::token_scores(logits, gold).argmax[3].item<int64_t>(), 11);
}

TEST(TokenScores, DoubleLogitsTakeTheAtenPathExactly) {
  const torch::Tensor logits = torch::randn({6, 50}, torch::kFloat64) * 5;
  const torch::Tensor gold = torch::randint(0, 50, {6}, torch::kLong);
  const ops::TokenScores s = ops::token_scores(logits, gold);
  EXPECT_TRUE(torch::equal(s.nll, -torch::log_softmax(logits, -1).gather(1, gold.unsqueeze(1)).squeeze(1)));
  EXPECT_THROW(ops::token_scores(torch::randn({2, 5}), torch::tensor({1L, 5L})), c10::Error);  // gold past V
}

TEST(TokenScores, RowChunksOfTheHeadScoreAsOneChunk) {
  using namespace model_cases;
  const config::ModelConfig c = tiny(PositionKind::rope, config::Objective::causal_lm);
  EncoderModel m = build_double(c, 3);
  m->to(torch::kFloat32);
  torch::NoGradGuard no_grad;
  const torch::Tensor ids = torch::randint(0, 11, {2, 12}, torch::kLong);
  const torch::Tensor hidden = m->forward({ids});
  const torch::Tensor rows = torch::tensor({0L, 3L, 4L, 5L, 13L, 20L, 23L});
  const torch::Tensor gold = torch::randint(0, 11, {7}, torch::kLong);
  const ops::TokenScores whole = eval::score_tokens(m, hidden, rows, gold);
  for (const int64_t chunk_bytes : {1L, 4 * 11 * 2L, 4 * 11 * 3L}) {  // 1, 2 and 3 rows at a time
    const ops::TokenScores chunked = eval::score_tokens(m, hidden, rows, gold, chunk_bytes);
    // The head's product over fewer rows may round differently (the BLAS blocks by rows).
    EXPECT_LT((chunked.nll - whole.nll).abs().max().item<double>(), 1e-5) << chunk_bytes;
    EXPECT_TRUE(torch::equal(chunked.argmax, whole.argmax)) << chunk_bytes;
  }
  const torch::Tensor logits = m->logits(hidden.reshape({-1, c.hidden_size}).index_select(0, rows));
  EXPECT_LT((whole.nll - model::token_cross_entropy(logits.to(torch::kFloat64), gold)).abs().max().item<double>(),
            2e-6);
}

}  // namespace token_scores_test
