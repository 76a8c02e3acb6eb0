// What evaluation reads off a language model's logits, per scored token: the loss
// -log softmax(logits)[gold] in double and the logits' argmax. On the CPU, float32 and bfloat16
// rows are read once each (no double copy of a [tokens, vocabulary] matrix): the row's maximum,
// then the sum of exp(logit - maximum) with a float exponential summed in double, so the loss
// differs from the double computation by about float's rounding (the logits' own precision).
// Double logits and other devices take log_softmax in double.
#pragma once

#include <ATen/ATen.h>

namespace roformer::ops {

struct TokenScores {
  at::Tensor nll;     // [N] double
  at::Tensor argmax;  // [N] long: the first index of the largest logit (of the first NaN, as at::argmax)
};

// logits [N, V] (float, bfloat16, half or double), gold [N] long in [0, V), on one device.
TokenScores token_scores(const at::Tensor& logits, const at::Tensor& gold);

}  // namespace roformer::ops
