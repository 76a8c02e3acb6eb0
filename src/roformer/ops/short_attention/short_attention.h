// Public API of the short-sequence attention op: softmax(q k^T scale) v for one self-attention
// call, CPU only, differentiable. Where LibTorch's CPU flash kernel streams key blocks with an
// online softmax, this op keeps one head's whole S x S score block in cache (an exact softmax
// per row; past 512 tokens, blocks of whole query rows) and multiplies with register-tiled small products
// (ops/common/small_gemm.h), which for the blocks of short sequences run about twice as fast as the BLAS calls ATen's
// kernel makes. It saves each row's log-sum-exp (B * H * S floats) and recomputes the scores in backward. Knows nothing
// of configs; model code picks it (model.attention_kernel).
#pragma once

#include <torch/types.h>

namespace roformer::ops {

constexpr int64_t kShortAttentionMaxSeq = 2048;
constexpr int64_t kShortAttentionMaxHeadDim = 512;

// Whether the op takes sequences of `seq` tokens in heads of `head_dim` features of this dtype on
// this device (what the two functions below check, from shapes alone).
bool short_attention_shape_supported(int64_t seq, int64_t head_dim, at::ScalarType dtype, const at::Device& device);

// Whether short_attention takes these tensors: [B, H, S, D] CPU tensors of one floating dtype
// (float32 or float64), equal shapes, 1 <= S <= kShortAttentionMaxSeq, D a positive multiple of 8
// up to kShortAttentionMaxHeadDim.
bool short_attention_supports(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

// softmax(q k^T / sqrt(D) (+ the causal mask)) v: [B, H, S, D], its memory in [B, S, H, D] order
// (so the heads merge back without a copy). Throws where short_attention_supports says no.
torch::Tensor short_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal);

// softmax(s + cope_term(s, at_integers)) v with s = q k^T scale (+ the causal mask): CoPE's
// contextual positions (Golovneva et al. 2024; ops/cope_term/cope_term.h's term) computed per row
// inside the kernel, so no [B, H, S, S] tensor is formed in forward or backward. at_integers
// [B, H, S, P] (q . e[p] for p < P) of q's dtype; differentiable in q, k, v and at_integers.
// Checks as short_attention does, and the table's shape.
torch::Tensor short_attention_cope(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   const torch::Tensor& at_integers, double scale, bool causal);

// softmax(q k^T / sqrt(D) + bias[h, S - 1 + j - i] (+ the causal mask)) v: a relative bias by key -
// query offset (ALiBi, T5's buckets, KERPLE, Sandwich: the [H, 2S - 1] rows the attention mask
// keeps) added to each score row inside the kernel, so no [B, H, S, S] mask is read or formed;
// differentiable in q, k, v and bias (its gradient summed by offset). Checks as short_attention
// does, and the bias's shape.
torch::Tensor short_attention_bias(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   const torch::Tensor& bias, bool causal);

// The same attention straight from one q/k/v projection, so that neither a bias add, a rotary
// op nor the gradient's concatenation of three parts makes a pass over memory of its own:
// qkv [B, S, 3 H D] (q, k, v features, each head's D together) without its bias; bias [3 H D]
// (or undefined) added as rows are read; rotation (or undefined) [2, S, D] of qkv's dtype, from
// short_attention_rotation, applied to q and k after the bias; relative (or undefined) [H, 2S - 1],
// a relative bias added to the scores as short_attention_bias adds it. Returns [B, H, S, D] as
// short_attention does; the gradients are qkv's (one tensor), the bias's and the relative bias's.
torch::Tensor short_attention_qkv(const torch::Tensor& qkv, const torch::Tensor& bias, int64_t heads, bool causal,
                                  const torch::Tensor& rotation, bool interleaved,
                                  const torch::Tensor& relative = torch::Tensor());

// Whether short_attention_qkv takes a projection of this shape and dtype (short_attention_supports
// of its [B, H, S, D] parts).
bool short_attention_qkv_supports(const torch::Tensor& qkv, int64_t heads);

// RoPE as tables for short_attention_qkv: rotation[0][s][d] = m cos(a), rotation[1][s][d] = -m sin(a)
// for the first feature of a pair and +m sin(a) for the second, a = positions[s] * position_scale
// * inv_freq[pair] (float64 [D / 2]), m = magnitude; pairs (2i, 2i + 1) when interleaved, else
// (i, i + D/2). Cosine and sine as the rope op's kernels compute them (ops/rope/rope_math.h).
torch::Tensor short_attention_rotation(const torch::Tensor& inv_freq, double position_scale, double magnitude,
                                       bool interleaved, const torch::Tensor& positions, at::ScalarType dtype);

}  // namespace roformer::ops
