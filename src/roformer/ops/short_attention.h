// Public API of the short-sequence attention op: softmax(q k^T scale) v for one self-attention
// call, CPU only, differentiable. Where LibTorch's CPU flash kernel streams key blocks with an
// online softmax, this op keeps one head's whole S x S score block in cache (an exact softmax
// per row) and multiplies with register-tiled small products (ops/small_gemm.h), which for the
// blocks of short sequences run about twice as fast as the BLAS calls ATen's kernel makes. It
// saves each row's log-sum-exp (B * H * S floats) and recomputes the scores in backward. Knows
// nothing of configs; model code picks it (model.attention_kernel).
#pragma once

#include <torch/types.h>

namespace roformer::ops {

constexpr int64_t kShortAttentionMaxSeq = 512;

// Whether short_attention takes these tensors: [B, H, S, D] CPU tensors of one floating dtype
// (float32 or float64), equal shapes, 1 <= S <= kShortAttentionMaxSeq, D a positive multiple of 8.
bool short_attention_supports(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

// softmax(q k^T / sqrt(D) (+ the causal mask)) v: [B, H, S, D], its memory in [B, S, H, D] order
// (so the heads merge back without a copy). Throws where short_attention_supports says no.
torch::Tensor short_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal);

}  // namespace roformer::ops
