// Evaluation in bf16 on the CPU (eval.precision bf16: LibTorch's CPU autocast, the hidden states
// kept in bf16 as under CUDA autocast): every family and layer variant of model_test's cases runs
// under it, its hidden states travel in bf16, and its per-token losses stay within bf16's rounding
// of the float32 model's; evaluation reports the precision it ran in.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model_cases.h"
#include "roformer/common/autocast.h"
#include "roformer/eval/evaluate.h"

namespace cpu_autocast_test {

using namespace model_cases;

// Per-token losses of `m` on `ids` (causal: each next token), under CPU bf16 autocast or not.
torch::Tensor token_losses(EncoderModel& m, const torch::Tensor& ids, bool bf16) {
  const AutocastGuard autocast(bf16, torch::kCPU);
  const torch::Tensor hidden = m->forward({ids});
  if (bf16) {
    EXPECT_EQ(hidden.scalar_type(), torch::kBFloat16) << "the stream is bf16 under autocast";
  }
  const int64_t S = ids.size(1);
  const torch::Tensor rows = torch::arange(0, S - 1, torch::kLong);
  const torch::Tensor gold = ids[0].slice(0, 1, S);
  return eval::score_tokens(m, hidden.narrow(0, 0, 1), rows, gold).nll;
}

TEST(CpuAutocast, EveryFamilyEvaluatesInBf16WithinItsRounding) {
  for (const Case& kase : all_cases()) {
    const config::ModelConfig c = tiny(kase, config::Objective::causal_lm);
    if (!defined_for(c)) continue;
    SCOPED_TRACE(kase.name);
    EncoderModel m = build_double(c, 5);
    m->to(torch::kFloat32);
    torch::NoGradGuard no_grad;
    torch::manual_seed(3);
    const torch::Tensor ids = torch::randint(0, 11, {1, 16}, torch::kLong);
    const torch::Tensor fp32 = token_losses(m, ids, false);
    torch::Tensor bf16;
    try {
      bf16 = token_losses(m, ids, true);
    } catch (const c10::Error& e) {
      ADD_FAILURE() << e.what_without_backtrace();
      continue;
    }
    ASSERT_TRUE(torch::isfinite(bf16).all().item<bool>());
    // bf16 keeps 8 bits of mantissa: a few parts in a thousand per rounding, a few roundings deep.
    EXPECT_LT((bf16 - fp32).abs().max().item<double>(), 0.05 * fp32.abs().max().item<double>());
    EXPECT_GT((bf16 - fp32).abs().max().item<double>(), 0.0) << "bf16 ran: the losses moved";
  }
}

TEST(CpuAutocast, EvaluationAsksForItOnTheCpuAndAutoStaysFp32) {
  const torch::Device cpu(torch::kCPU);
  EXPECT_TRUE(eval::eval_uses_bf16(config::Precision::bf16, cpu));
  EXPECT_FALSE(eval::eval_uses_bf16(config::Precision::auto_, cpu));
  EXPECT_FALSE(eval::eval_uses_bf16(config::Precision::fp32, cpu));
}

}  // namespace cpu_autocast_test
