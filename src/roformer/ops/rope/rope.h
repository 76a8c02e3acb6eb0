// Public API of the fused RoPE op: rotates queries and keys (and optionally values) in one
// pass, CPU or CUDA, forward and backward. Also registered as torch.ops.roformer.rope /
// rope_ (in-place) in roformer_core for Python. Knows nothing of configs: callers pass the
// inverse frequencies (model/position/rope_frequencies.h computes them for every scaling).
#pragma once

#include <torch/types.h>

#include <vector>

namespace roformer::ops {

enum class RopeLayout {
  bshd,  // [batch, seq, heads, head_dim]
  bhsd,  // [batch, heads, seq, head_dim]
};

struct RopeSpec {
  torch::Tensor inv_freq;     // float64 [rotary_dim / 2], any device (moved to the inputs')
  double position_scale = 1;  // linear scaling (PI) multiplies positions by 1/factor
  double magnitude = 1;       // YaRN: cos/sin scaled for q and k; v (third tensor) never scaled
  bool interleaved = true;    // (2i, 2i+1) RoFormer pairs; false: (i, i + rotary_dim/2)
  int64_t rotary_dim = 0;     // rotated features per head (even); the rest pass through; 0 = head_dim
  RopeLayout layout = RopeLayout::bhsd;
  bool position_offsets = false;  // positions are [B] start offsets: position = offset[b] + s
  // Optional (cos, sin) table from rope_table(inv_freq, position_scale, rows), on the inputs'
  // device: float/half/bf16 kernels read it instead of computing a sincos per pair (positions
  // past its rows are computed); same values either way. float64 inputs ignore it.
  torch::Tensor cos_sin;
};

// The (cos, sin) table of positions 0..rows-1: float32 [rows, rotary_dim] on the CPU, row p
// = cos of each pair, then sin, at angle p * position_scale * inv_freq[i] (the kernels' math).
torch::Tensor rope_table(const torch::Tensor& inv_freq, double position_scale, int64_t rows);

// Out-of-place and differentiable: returns rotated copies of xs (1 to 3 tensors of one dtype
// and device, same batch/seq/head_dim, any strides, any head counts). positions: int64 [S]
// shared by the batch, [B, S] explicit ids, or [B] offsets (spec.position_offsets).
std::vector<torch::Tensor> rope(const std::vector<torch::Tensor>& xs, const torch::Tensor& positions,
                                const RopeSpec& spec);

// In place, for inference (refuses tensors that require grad).
void rope_(const std::vector<torch::Tensor>& xs, const torch::Tensor& positions, const RopeSpec& spec);

// The same rotation by -angle (the backward pass): grads of rope() inputs from output grads.
std::vector<torch::Tensor> rope_backward(const std::vector<torch::Tensor>& grads, const torch::Tensor& positions,
                                         const RopeSpec& spec);

}  // namespace roformer::ops
