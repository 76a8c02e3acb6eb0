// Scores a model on evaluation windows: token-weighted cross-entropy, perplexity, accuracy of
// the top prediction, and the loss by position inside the window (bucketed) so a reader sees
// where a model breaks past its training length.
#pragma once

#include <torch/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "roformer/data/batches.h"
#include "roformer/data/task_batches.h"
#include "roformer/model/encoder.h"
#include "roformer/ops/token_scores/token_scores.h"

namespace roformer::eval {

struct EvalResult {
  double loss_sum = 0;
  int64_t tokens = 0;
  int64_t correct = 0;
  std::vector<double> bucket_loss_sum;  // [buckets]: by position within the window
  std::vector<int64_t> bucket_tokens;
  int64_t sequences = 0;  // rows with something scored
  int64_t exact = 0;      // of them, rows whose every scored token was the top prediction
  // A task's floors on the same examples: each trivial strategy's name, exact match and token
  // accuracy.
  struct Floor {
    std::string name;
    double exact_match = 0, accuracy = 0;
  };
  std::vector<Floor> floors;
  int64_t seen_in_training = -1;  // a task's examples also in the run's training stream; -1: not counted
  double loss() const { return tokens ? loss_sum / static_cast<double>(tokens) : 0.0; }
  double perplexity() const;
  double accuracy() const { return tokens ? static_cast<double>(correct) / static_cast<double>(tokens) : 0.0; }
  double exact_match() const { return sequences ? static_cast<double>(exact) / static_cast<double>(sequences) : 0.0; }
};

// Runs every batch of `windows` (at most max_batches if > 0) in eval mode without gradients;
// `bf16`: the forward pass under bf16 autocast (CUDA or the CPU), the loss still in double.
EvalResult evaluate(model::EncoderModel& model, const data::EvalWindows& windows, const torch::Device& device,
                    int64_t buckets = 8, int64_t max_batches = 0, bool bf16 = false);

// A synthetic task's examples at one length (data/task_batches.h): loss and accuracy on the
// answer tokens, and exact match per example.
EvalResult evaluate(model::EncoderModel& model, const data::TaskEvalSet& examples, const torch::Device& device,
                    int64_t buckets = 8, bool bf16 = false);

// Exact match of one batch of `rows` rows of length L: `scored` holds the flat indices of the
// scored positions, `right` whether each one's top prediction was its target.
struct ExactCounts {
  int64_t sequences = 0;  // rows with something scored
  int64_t exact = 0;      // of them, rows with nothing wrong
};
ExactCounts count_exact_rows(const torch::Tensor& scored, const torch::Tensor& right, int64_t rows, int64_t L);

// The bytes of float logits the head forms at once when scoring (the logits of an 8192-token
// window over a 49,152-token vocabulary would be 1.6 GB).
constexpr int64_t kScoredLogitBytes = int64_t{256} << 20;

// The losses (double) and argmaxes of the scored rows `rows` of `hidden` (the model's last hidden
// states, rows flattened) against `gold`, the head applied to row chunks of `chunk_bytes` of float logits.
ops::TokenScores score_tokens(model::EncoderModel& model, const torch::Tensor& hidden, const torch::Tensor& rows,
                              const torch::Tensor& gold, int64_t chunk_bytes = kScoredLogitBytes);

// Whether evaluation runs in bf16: eval.precision bf16 or auto on a CUDA device, bf16 on the CPU.
bool eval_uses_bf16(config::Precision precision, const torch::Device& device);

}  // namespace roformer::eval
