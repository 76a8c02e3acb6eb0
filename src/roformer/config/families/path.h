// PaTH's settings.
// The family's own file on the config floor: its struct and enums here, their fields and its row
// of the family table in path.cpp.
#pragma once

#include <cstdint>

#include "roformer/config/field_visitor.h"

namespace roformer::config {

// PaTH (Yang et al., NeurIPS 2025; flash-linear-attention's PaTHAttention): scores
// q_i . (H_i H_{i-1} ... H_{j+1} k_j) with data-dependent Householder-like H_t = I - beta_t w_t w_t^T:
// w_t from the layer's input (a rank-`rank` projection, a causal depthwise convolution of 3 with
// SiLU, an L2 norm per head), beta_t = 2 sigmoid(u . x_t + b). Causal; no RoPE. forget_gate adds
// FoX's c_i - c_j (PaTH-FoX).
struct PathConfig {
  bool forget_gate = false;  // PaTH-FoX
  int64_t rank = 32;         // the low-rank w projection hidden -> rank -> hidden (the authors: 32)
  bool short_conv = true;    // the authors' use_w_shortconv
  int64_t block = 32;        // tokens per block of the blockwise products (a speed knob; results equal)
  void visit(FieldVisitor& v);
};

}  // namespace roformer::config
