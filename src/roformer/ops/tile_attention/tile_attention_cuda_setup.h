// The launch description of CUDA tile attention from tensors: q, k, v and the output, and the term's
// tables in the accumulation dtype on the tensors' device. The public ops (tile_attention.h) check
// CUDA tensors and launch it; the host-emulation tests describe CPU tensors and run the kernel on
// the host, so this setup is tested without a GPU too.
#pragma once

#include <torch/types.h>

#include <vector>

#include "roformer/ops/tile_attention/tile_attention.h"
#include "roformer/ops/tile_attention/tile_attention_cuda_launch.h"
#include "roformer/ops/tile_attention/tile_term.h"

namespace roformer::ops {

// The launch of q, k (the term's scoring ones where it has them: the caller passes them), v and
// out, [B, H, S, D] each, with the term (none, FoX, FIRE or buckets; CoPE, causal; its rotations
// or chunks, causal, softmax), the normaliser (stick-breaking: causal) and right padding as key
// lengths [B] (or undefined); its tables are kept alive in `keep`.
TileCudaLaunch describe_tile_cuda(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& out, double scale, bool causal, const TileTerm& term,
                                  TileNormalizer normalizer, const torch::Tensor& key_lengths,
                                  std::vector<torch::Tensor>& keep);

// The launch with a relative bias read from its rows [H or 1, 2S - 1] (column S - 1 + j - i) and
// a right padding as key lengths [B] (undefined: none).
TileCudaLaunch describe_tile_cuda_bias(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const torch::Tensor& out, double scale, bool causal,
                                       const torch::Tensor& bias_rows, const torch::Tensor& key_lengths,
                                       std::vector<torch::Tensor>& keep);

}  // namespace roformer::ops
