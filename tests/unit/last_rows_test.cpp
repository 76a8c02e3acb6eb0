// The last layer computing only the rows a caller reads (EncoderModel::forward's rows_from, what
// evaluation uses where the scored tokens sit at the end of each window): for every family and
// layer variant, causal and MLM, with a padding mask, whole and in query blocks, the hidden
// states of rows [from, S) equal the whole pass's in double, and so do the gradients they send
// back; the evaluation of a task scores the same loss as the whole pass and its head.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model_cases.h"
#include "roformer/data/task_batches.h"
#include "roformer/data/tasks/task_generator.h"
#include "roformer/eval/evaluate.h"

namespace last_rows_test {

using namespace model_cases;

// The largest difference between the rows [from, S) of a whole pass and the pass from `from`.
double tail_difference(EncoderModel& m, const EncoderInput& in, int64_t from) {
  const int64_t S = in.input_ids.size(1);
  const torch::Tensor whole = m->forward(in).narrow(1, from, S - from);
  const torch::Tensor tail = m->forward(in, from);
  EXPECT_EQ(tail.sizes(), whole.sizes());
  return (tail - whole).abs().max().item<double>();
}

TEST(LastRows, EveryFamilyGivesTheWholePassRowsFromAnyRow) {
  for (const Case& kase : all_cases()) {
    for (auto objective : {config::Objective::causal_lm, config::Objective::mlm}) {
      const config::ModelConfig c = tiny(kase, objective);
      if (!defined_for(c)) continue;
      SCOPED_TRACE(kase.name + (objective == config::Objective::mlm ? " mlm" : " causal"));
      EncoderModel m = build_double(c, 13);
      torch::NoGradGuard no_grad;
      torch::manual_seed(2);
      const int64_t S = 16;
      const torch::Tensor ids = torch::randint(0, 11, {2, S}, torch::kLong);
      torch::Tensor mask = torch::ones({2, S}, torch::kLong);
      mask.index_put_({1, torch::indexing::Slice(11)}, 0);                       // a right padding
      for (const double whole_limit : {AttentionMask::kWholeMaskBytes, 64.0}) {  // whole, then blocks of rows
        m->attention_whole_limit_bytes = whole_limit;
        for (const int64_t from : {1L, 7L, 12L, 15L}) {  // a quarter of the rows or fewer: 12 and 15
          EXPECT_LT(tail_difference(m, {ids}, from), 1e-12) << "from " << from << ", limit " << whole_limit;
          if (objective == config::Objective::mlm) {
            EXPECT_LT(tail_difference(m, {ids, mask}, from), 1e-12) << "padded, from " << from;
          }
        }
      }
    }
  }
}

TEST(LastRows, GradientsThroughTheRowsEqualTheWholePass) {
  for (const Case& kase : all_cases()) {
    const config::ModelConfig c = tiny(kase, config::Objective::causal_lm);
    SCOPED_TRACE(kase.name);
    EncoderModel whole = build_double(c, 17), tail = build_double(c, 17);
    torch::manual_seed(4);
    const torch::Tensor ids = torch::randint(0, 11, {2, 12}, torch::kLong);
    const torch::Tensor up = torch::randn({2, 3, c.hidden_size}, torch::kFloat64);
    (whole->forward({ids}).narrow(1, 9, 3) * up).sum().backward();
    (tail->forward({ids}, 9) * up).sum().backward();
    auto tail_params = tail->named_parameters();
    for (const auto& item : whole->named_parameters()) {
      const torch::Tensor& g = item.value().grad();
      const torch::Tensor& t = tail_params[item.key()].grad();
      ASSERT_EQ(g.defined(), t.defined()) << item.key();
      if (g.defined()) {
        EXPECT_LT((g - t).abs().max().item<double>(), 1e-12) << item.key();
      }
    }
  }
}

// The needle's answers end each example: evaluation computes only their rows in the last layer,
// and scores what the whole pass through the head scores (loss, correct tokens, exact matches).
TEST(LastRows, TaskEvaluationScoresWhatTheWholePassScores) {
  config::ModelConfig c = tiny(PositionKind::fire, config::Objective::causal_lm);
  c.vocab_size = 128;
  EncoderModel m = build_double(c, 19);
  config::TaskConfig task;
  task.name = config::TaskKind::niah_single;
  const std::shared_ptr<const data::TaskGenerator> g = data::make_task_generator(task, true);
  const data::TaskEvalSet examples(g, 96, 12, 4, 0, 1, 7);
  const eval::EvalResult r = eval::evaluate(m, examples, torch::kCPU);
  double loss = 0;
  int64_t tokens = 0, correct = 0;
  torch::NoGradGuard no_grad;
  for (int64_t i = 0; i < examples.num_batches(); ++i) {
    const data::Batch b = examples.batch(i);
    const torch::Tensor flat = b.targets.reshape({-1}), scored = (flat != -100).nonzero().squeeze(1);
    EXPECT_GT(model::scored_rows(scored, 96).from, 72);  // evaluation took the last rows alone
    const torch::Tensor logits = m->scored_logits(m->forward({b.input_ids}), scored);
    const torch::Tensor gold = flat.index_select(0, scored);
    loss += token_cross_entropy(logits, gold).sum().item<double>();
    tokens += scored.size(0);
    correct += (logits.argmax(-1) == gold).sum().item<int64_t>();
  }
  ASSERT_EQ(r.tokens, tokens);
  EXPECT_NEAR(r.loss_sum, loss, 1e-10);
  EXPECT_EQ(r.correct, correct);
}

TEST(LastRows, RefusesRowsOutsideThePass) {
  EncoderModel m = build_double(tiny(PositionKind::rope, config::Objective::causal_lm));
  const torch::Tensor ids = torch::randint(0, 11, {1, 6}, torch::kLong);
  EXPECT_THROW(m->forward({ids}, 6), c10::Error);
  EXPECT_THROW(m->forward({ids}, -1), c10::Error);
}

}  // namespace last_rows_test
