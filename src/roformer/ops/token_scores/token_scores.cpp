// Token scores: argument checks, the CPU kernel's launch, and log_softmax in double elsewhere.
#include "roformer/ops/token_scores/token_scores.h"

#include "roformer/ops/token_scores/token_scores_kernels.h"

namespace roformer::ops {

TokenScores token_scores(const at::Tensor& logits, const at::Tensor& gold) {
  TORCH_CHECK(logits.dim() == 2 && gold.dim() == 1 && gold.size(0) == logits.size(0),
              "roformer::token_scores: logits [N, V] and gold [N] expected, got ", logits.sizes(), " and ",
              gold.sizes());
  TORCH_CHECK(gold.scalar_type() == at::kLong && gold.device() == logits.device(),
              "roformer::token_scores: gold must be int64 on the logits' device");
  const int64_t V = logits.size(1);
  const auto type = logits.scalar_type();
  if (!logits.is_cpu() || (type != at::kFloat && type != at::kBFloat16) || V == 0) {
    const at::Tensor l = logits.to(at::kDouble);
    return {at::nll_loss_nd(at::log_softmax(l, -1), gold, {}, at::Reduction::None, -100), l.argmax(-1)};
  }
  if (gold.numel() > 0) {
    const auto [lo, hi] = at::aminmax(gold);
    TORCH_CHECK(lo.item<int64_t>() >= 0 && hi.item<int64_t>() < V, "roformer::token_scores: gold outside [0, ", V, ")");
  }
  const at::Tensor rows = logits.contiguous(), g = gold.contiguous();
  TokenScores out{at::empty({rows.size(0)}, logits.options().dtype(at::kDouble)),
                  at::empty({rows.size(0)}, logits.options().dtype(at::kLong))};
  TokenScoresLaunch p;
  p.rows = rows.size(0);
  p.vocab = V;
  p.bf16 = type == at::kBFloat16;
  p.logits = rows.data_ptr();
  p.gold = g.data_ptr<int64_t>();
  p.nll = out.nll.data_ptr<double>();
  p.argmax = out.argmax.data_ptr<int64_t>();
  token_scores_cpu(p);
  return out;
}

}  // namespace roformer::ops
