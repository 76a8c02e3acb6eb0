// Linear attention (Katharopoulos et al. 2020) with RoPE as RoFormer's Eq. 19 puts it:
//   out_m = sum_n (R_m phi(q_m))^T (R_n phi(k_n)) v_n / sum_n phi(q_m)^T phi(k_n)
// The rotation acts on the features in the numerator only; the normaliser stays unrotated (and
// positive). Bidirectional: one [F, D] key-value summary per head; causal: chunks of 64
// positions, masked products inside a chunk and prefix sums of the summaries across chunks, so
// memory and time grow linearly in S. Feature maps: elu(x) + 1, or Performer's
// FAVOR+ positive orthogonal random features (approximating the softmax kernel).
#pragma once

#include <torch/types.h>

#include <cstdint>

namespace roformer::model {

// elu(x) + 1 (> 0), feature-wise: [..., D] -> [..., D].
torch::Tensor elu1_features(const torch::Tensor& x);

// FAVOR+: exp(w_i . x' - |x'|^2 / 2) / sqrt(m) with x' = x / D^(1/4), for the m rows of
// `projection` [m, D]. Queries are stabilised per row, keys by one global maximum (constants that
// cancel between numerator and normaliser).
torch::Tensor favor_features(const torch::Tensor& x, const torch::Tensor& projection, bool is_query);

// m x D orthogonal Gaussian projection (blocks of D orthogonal rows, Gaussian row norms), drawn
// from its own generator so redraws never touch the dropout stream.
torch::Tensor orthogonal_random_projection(int64_t m, int64_t d, uint64_t seed);

// phi_q, phi_k: [B, H, S, F] features (unrotated); rot_q, rot_k: the same after RoPE (or the
// same tensors without it); v: [B, H, S, D]; key_keep: [B, S] 1 = token, 0 = padding, or
// undefined. Returns [B, H, S, D].
torch::Tensor linear_attention(const torch::Tensor& phi_q, const torch::Tensor& phi_k, const torch::Tensor& rot_q,
                               const torch::Tensor& rot_k, const torch::Tensor& v, bool causal,
                               const torch::Tensor& key_keep);

}  // namespace roformer::model
