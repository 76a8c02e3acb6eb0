// Evaluation loop (see evaluate.h).
#include "roformer/eval/evaluate.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "roformer/common/autocast.h"

namespace roformer::eval {

double EvalResult::perplexity() const {
  return std::exp(loss());
}

bool eval_uses_bf16(config::Precision precision, const torch::Device& device) {
  if (device.is_cuda()) return precision != config::Precision::fp32;
  return device.is_cpu() && precision == config::Precision::bf16;
}

ExactCounts count_exact_rows(const torch::Tensor& scored, const torch::Tensor& right, int64_t rows, int64_t L) {
  const torch::Tensor row = torch::div(scored, L, "floor").cpu();
  const torch::Tensor per_row = torch::bincount(row, {}, rows);
  const torch::Tensor wrong_per_row = torch::bincount(row, (~right).cpu().to(torch::kFloat64), rows);
  return {(per_row > 0).sum().item<int64_t>(), ((per_row > 0) & (wrong_per_row == 0)).sum().item<int64_t>()};
}

ops::TokenScores score_tokens(model::EncoderModel& model, const torch::Tensor& hidden, const torch::Tensor& rows,
                              const torch::Tensor& gold, int64_t chunk_bytes) {
  const torch::Tensor h = hidden.reshape({-1, hidden.size(-1)});
  const int64_t N = rows.size(0), vocab = model->config().vocab_size;
  const int64_t per_chunk = std::max<int64_t>(1, chunk_bytes / (4 * vocab));
  std::vector<torch::Tensor> nll, argmax;
  for (int64_t a = 0; a < N; a += per_chunk) {
    const int64_t n = std::min(per_chunk, N - a);
    const ops::TokenScores s =
        ops::token_scores(model->logits(h.index_select(0, rows.narrow(0, a, n))), gold.narrow(0, a, n));
    nll.push_back(s.nll);
    argmax.push_back(s.argmax);
  }
  return {torch::cat(nll), torch::cat(argmax)};
}

namespace {

// Scores `n` batches from `batch_at`; buckets by position within each batch's rows.
EvalResult evaluate_batches(model::EncoderModel& model, int64_t n, const std::function<data::Batch(int64_t)>& batch_at,
                            const torch::Device& device, int64_t buckets, bool bf16) {
  const bool was_training = model->is_training();
  model->eval();
  torch::NoGradGuard no_grad;
  EvalResult r;
  r.bucket_loss_sum.assign(static_cast<size_t>(buckets), 0.0);
  r.bucket_tokens.assign(static_cast<size_t>(buckets), 0);
  for (int64_t i = 0; i < n; ++i) {
    const data::Batch b = batch_at(i);
    const int64_t rows = b.input_ids.size(0), L = b.input_ids.size(1);
    const torch::Tensor ids = b.input_ids.to(device), targets = b.targets.to(device);
    const torch::Tensor flat = targets.reshape({-1});
    const torch::Tensor scored = (flat != -100).nonzero().squeeze(1);  // [N]
    const torch::Tensor gold = flat.index_select(0, scored);
    ops::TokenScores scores;
    {
      const AutocastGuard autocast(bf16, device.type());
      const model::ScoredRows read = model::scored_rows(scored, L);  // the last layer's rows [from, L) alone
      torch::Tensor hidden;
      {
        const AutocastCacheOff each_weight_once;  // the head's cast alone is kept, for its row chunks
        hidden = model->forward({ids}, read.from);
      }
      scores = score_tokens(model, hidden, read.scored, gold);
    }
    const torch::Tensor& nll = scores.nll;  // [N], double
    const torch::Tensor right = scores.argmax == gold;
    r.loss_sum += nll.sum().item<double>();
    r.tokens += scored.size(0);
    r.correct += right.sum().item<int64_t>();
    const ExactCounts exact = count_exact_rows(scored, right, rows, L);
    r.sequences += exact.sequences;
    r.exact += exact.exact;
    const torch::Tensor bucket = torch::div((scored % L) * buckets, L, "floor");  // position in the window -> bucket
    const torch::Tensor sums = torch::zeros({buckets}, torch::kFloat64).index_add_(0, bucket.cpu(), nll.cpu());
    const torch::Tensor counts = torch::bincount(bucket.cpu(), {}, buckets);
    const auto sums_a = sums.accessor<double, 1>();
    const auto counts_a = counts.accessor<int64_t, 1>();
    for (int64_t k = 0; k < buckets; ++k) {
      r.bucket_loss_sum[static_cast<size_t>(k)] += sums_a[k];
      r.bucket_tokens[static_cast<size_t>(k)] += counts_a[k];
    }
  }
  if (was_training) model->train();
  return r;
}

}  // namespace

EvalResult evaluate(model::EncoderModel& model, const data::EvalWindows& windows, const torch::Device& device,
                    int64_t buckets, int64_t max_batches, bool bf16) {
  const int64_t n = max_batches > 0 ? std::min(max_batches, windows.num_batches()) : windows.num_batches();
  return evaluate_batches(
      model, n, [&](int64_t i) { return windows.batch(i); }, device, buckets, bf16);
}

EvalResult evaluate(model::EncoderModel& model, const data::TaskEvalSet& examples, const torch::Device& device,
                    int64_t buckets, bool bf16) {
  return evaluate_batches(
      model, examples.num_batches(), [&](int64_t i) { return examples.batch(i); }, device, buckets, bf16);
}

}  // namespace roformer::eval
