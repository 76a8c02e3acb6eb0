// Stick-breaking attention (Tan, Yang, Courville, Panda, Shen, ICLR 2025; the authors' reference
// in shawntan/stickbreaking-attention, sb_ref.py): softmax replaced by breaking a stick from the
// query backwards. For query i and keys j < i (strictly causal),
//   A_ij = sigmoid(z_ij) prod_{j<k<i} (1 - sigmoid(z_ik)),
// computed in log space, log A_ij = logsigmoid(z_ij) + sum_{j<k<i} logsigmoid(-z_ik), the sum a
// suffix sum along the key axis (never the reference's [S, S] product matrix). Nothing
// normalises the weights: the remainder 1 - sum_j A_ij is what the sticks leave.
#pragma once

#include <torch/types.h>

namespace roformer::model {

struct StickBreaking {
  torch::Tensor weights;    // A [.., C, S]
  torch::Tensor remainder;  // 1 - sum_j A_ij [.., C]
};

// scores z [.., C, S] of query rows first_row .. first_row + C - 1 (keys hidden by a mask at
// -inf; keys at or after each row's own index are hidden here) -> A and its remainder, in the
// scores' dtype.
StickBreaking stick_breaking_weights(const torch::Tensor& scores, int64_t first_row);

}  // namespace roformer::model
