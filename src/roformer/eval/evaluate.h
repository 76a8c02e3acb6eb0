// Scores a model on evaluation windows: token-weighted cross-entropy, perplexity, accuracy of
// the top prediction, and the loss by position inside the window (bucketed) so a reader sees
// where a model breaks past its training length.
#pragma once

#include <torch/types.h>

#include <vector>

#include "roformer/data/batches.h"
#include "roformer/model/encoder.h"

namespace roformer::eval {

struct EvalResult {
  double loss_sum = 0;
  int64_t tokens = 0;
  int64_t correct = 0;
  std::vector<double> bucket_loss_sum;  // [buckets]: by position within the window
  std::vector<int64_t> bucket_tokens;
  double loss() const { return tokens ? loss_sum / static_cast<double>(tokens) : 0.0; }
  double perplexity() const;
  double accuracy() const { return tokens ? static_cast<double>(correct) / static_cast<double>(tokens) : 0.0; }
};

// Runs every batch of `windows` (at most max_batches if > 0) in eval mode without gradients;
// `bf16`: the forward pass under bf16 autocast (CUDA), the loss still in double.
EvalResult evaluate(model::EncoderModel& model, const data::EvalWindows& windows, const torch::Device& device,
                    int64_t buckets = 8, int64_t max_batches = 0, bool bf16 = false);

// Whether evaluation runs in bf16: eval.precision bf16, or auto, on a CUDA device.
bool eval_uses_bf16(config::Precision precision, const torch::Device& device);

}  // namespace roformer::eval
