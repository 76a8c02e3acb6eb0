// xPos (Sun et al. 2023, "A Length-Extrapolatable Transformer"): RoPE whose query pair i is
// also scaled by zeta_i^(m/scale_base) and key pair i by zeta_i^(-n/scale_base), with
// zeta_i = (2i/d + gamma) / (1 + gamma), so q_m.k_n carries zeta_i^((m-n)/scale_base): a decay
// with distance for past keys (causal attention). With bidirectional attention the factor grows
// for keys after the query; the scores still depend only on m - n.
#pragma once

#include "roformer/model/position/rope.h"

namespace roformer::model {

// The per-feature scale zeta^(p/scale_base) for positions p, [.., S] -> [.., S, head_dim]
// (1 for features past rotary_dim), float64; the key side uses its reciprocal.
torch::Tensor xpos_scale(const torch::Tensor& positions, const config::XposConfig& config, config::RopePairing pairing,
                         int64_t rotary_dim, int64_t head_dim);

class XposImpl : public RopeImpl {
 public:
  XposImpl(const config::RopeConfig& rope, const config::XposConfig& xpos, int64_t head_dim);

  // The fused RoPE rotation, then q * zeta^(m'/B) and k * zeta^(-n'/B) with m' = m - S/2:
  // centring changes no score (only m - n enters) and keeps both factors near 1 (torchscale does
  // the same). Scaling both features of a pair commutes with its rotation.
  void rotate(torch::Tensor& q, torch::Tensor& k, torch::Tensor& v, const torch::Tensor& positions) override;
  // xPos scales q and k apart (by zeta^(n/gamma) and its inverse): no fused rotation tables.

 private:
  config::XposConfig xpos_;
  int64_t head_dim_;
  TableCache scale_;  // [2, S, head_dim] in q's dtype for shared positions: q's scale, then k's
};

}  // namespace roformer::model
