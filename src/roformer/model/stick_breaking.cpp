// Stick-breaking attention weights (see stick_breaking.h).
#include "roformer/model/stick_breaking.h"

#include <torch/torch.h>

#include <limits>

namespace roformer::model {

StickBreaking stick_breaking_weights(const torch::Tensor& scores, int64_t first_row) {
  const int64_t C = scores.size(-2), S = scores.size(-1);
  const auto opts = torch::dtype(torch::kLong).device(scores.device());
  const torch::Tensor rows = torch::arange(first_row, first_row + C, opts).unsqueeze(1);  // [C, 1]
  // Hidden: the key is the query itself or after it, or the mask hid it (-inf).
  const torch::Tensor hidden = (torch::arange(S, opts).unsqueeze(0) >= rows) | scores.isneginf();
  const torch::Tensor log_z = torch::log_sigmoid(scores).masked_fill(hidden, -std::numeric_limits<double>::infinity());
  const torch::Tensor log_beta = torch::log_sigmoid(-scores).masked_fill(hidden, 0.0);
  // sum_{k > j} log_beta_k: the suffix sum after j, accumulated from the query backwards so the
  // near keys that matter most are summed first; hidden keys add 0.
  const torch::Tensor suffix = log_beta.flip(-1).cumsum(-1).flip(-1);  // sum_{k >= j}
  const torch::Tensor after = torch::cat({suffix.narrow(-1, 1, S - 1), torch::zeros_like(suffix.narrow(-1, 0, 1))}, -1);
  const torch::Tensor weights = torch::exp(log_z + after);
  return {weights, 1.0 - weights.sum(-1)};
}

}  // namespace roformer::model
