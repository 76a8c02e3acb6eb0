// Kernel entry points of the short-sequence attention op (no LibTorch types): short_attention.cpp
// fills a ShortAttentionLaunch and calls the CPU kernel (short_attention_cpu.cpp).
#pragma once

#include <cstdint>

#include "roformer/ops/common/kernel_dtype.h"

namespace roformer::ops {

// The widest head the kernel's per-row scratch holds (the op checks kShortAttentionMaxHeadDim against it).
constexpr int64_t kShortAttentionKernelMaxHeadDim = 512;

// A [B, H, S, D] tensor with unit stride along D: element (b, h, s, d) at
// data[b * stride[0] + h * stride[1] + s * stride[2] + d].
struct AttentionOperand {
  void* data = nullptr;
  int64_t stride[3] = {0, 0, 0};
};

struct ShortAttentionLaunch {
  KernelDType dtype = KernelDType::f32;  // f32 or f64
  int64_t batch = 0, heads = 0, seq = 0, head_dim = 0;
  int64_t padded_seq = 0;  // the score rows' length in the kernel's buffers: seq rounded up to a multiple of 16
  bool causal = false;
  double scale = 1.0;  // on the scores q . k
  AttentionOperand q, k, v, out;
  // [B * H, seq] log-sum-exp of each row's scores (float, double for f64): written by the forward
  // when not null; the backward recomputes the probabilities from it.
  void* lse = nullptr;
  AttentionOperand grad_out, grad_q, grad_k, grad_v;  // backward only
  // From one projection (short_attention_qkv): its bias [3, H, D] (q, k, v rows) added as rows
  // are read, or null; rotary tables [2, seq, head_dim] (cos, signed sin: see
  // short_attention_rotation) applied to q and k after the bias, or null. interleaved: a
  // feature's partner is d ^ 1, else (d + D/2) mod D.
  const void* bias = nullptr;
  const void* rotation = nullptr;
  bool interleaved = true;
  // Backward, when not null: [B, 3, H, D] sums over the sequence of the q, k, v gradients (before
  // the rotation), per batch element: the bias's gradient once summed over the batch.
  void* grad_bias = nullptr;
  // CoPE's term (short_attention_cope), when not null: [B * H, seq, cope_positions] q . e[p] of
  // every query row, contiguous; the scores become s + cope_term(s) (ops/common/cope_rows.h)
  // before the softmax. Backward: its gradient, the same shape, when not null.
  const void* cope_at_integers = nullptr;
  int64_t cope_positions = 0;
  void* grad_cope_at_integers = nullptr;
  // A relative bias (short_attention_bias), when not null: [heads, 2 seq - 1] of the operands'
  // dtype, contiguous; column seq - 1 + j - i is added to score (i, j) after the scale. Backward:
  // its gradient per pair, [B * H, 2 seq - 1] (zeroed by the caller), when not null.
  const void* rel_bias = nullptr;
  void* grad_rel_bias = nullptr;
};

// Forward: out (and lse). Backward: grad_q, grad_k, grad_v from grad_out, lse, q, k, v.
// Parallel over the B * H (batch, head) pairs with at::parallel_for.
void short_attention_forward_cpu(const ShortAttentionLaunch& launch);
void short_attention_backward_cpu(const ShortAttentionLaunch& launch);

}  // namespace roformer::ops
