// Kernel entry point of the token scores (no LibTorch types): token_scores.cpp fills a
// TokenScoresLaunch and calls the CPU kernel.
#pragma once

#include <cstdint>

namespace roformer::ops {

struct TokenScoresLaunch {
  int64_t rows = 0, vocab = 0;    // N, V
  bool bf16 = false;              // logits in bfloat16, else float32
  const void* logits = nullptr;   // [N, V], rows contiguous
  const int64_t* gold = nullptr;  // [N], in [0, V)
  double* nll = nullptr;          // [N]: -log softmax(row)[gold]
  int64_t* argmax = nullptr;      // [N]: the first index of the row's largest logit (of its first NaN)
};

// CPU kernel (token_scores_cpu.cpp), parallel over rows.
void token_scores_cpu(const TokenScoresLaunch& launch);

}  // namespace roformer::ops
