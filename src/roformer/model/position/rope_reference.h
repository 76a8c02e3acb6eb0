// The reference RoPE: plain LibTorch ops, angles and sin/cos in double precision: the fused
// op's test oracle, and the model's implementation with model.position.rope.impl=reference.
#pragma once

#include <torch/types.h>

#include "roformer/config/config.h"
#include "roformer/model/position/rope_frequencies.h"

namespace roformer::model {

// x: [B, H, S, D]; positions: int64 [S] or [B, S]. Rotates the first `rotary_dim` features of
// each head (pairs (2i, 2i+1) if interleaved, (i, i + rotary_dim/2) if half) by
// position * position_scale * inv_freq[i], scales them by `magnitude`, and passes the rest
// through. Returns a new tensor of x's dtype; the rotation is computed in x's dtype from
// cos/sin evaluated in double.
torch::Tensor rope_reference(const torch::Tensor& x, const torch::Tensor& positions, const RopeFrequencies& freqs,
                             config::RopePairing pairing, int64_t rotary_dim);

}  // namespace roformer::model
