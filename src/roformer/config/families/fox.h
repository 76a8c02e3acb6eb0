// FoX's settings.
// The family's own file on the config floor: its struct and enums here, their fields and its row
// of the family table in fox.cpp.
#pragma once

#include <cstdint>

#include "roformer/config/field_visitor.h"

namespace roformer::config {

enum class FoxGate { data, bias_only };

// FoX, the Forgetting Transformer (Lin et al., ICLR 2025): per layer and head a forget gate
// f_t = sigmoid(w . x_t + b) from the layer's input, and scores q.k / sqrt(d) + c_i - c_j with
// c = cumsum(log f) (causal). Bidirectional attention (MLM) uses -|c_i - c_j|, our own form.
struct FoxConfig {
  FoxGate gate = FoxGate::data;  // data: f_t from x_t; bias_only: one learned f per head (ALiBi with a learned slope)
  bool rope = false;             // also rotate q and k with model.position.rope (the authors' use_rope)
  // bias_only: the authors' fgate_bias_init; head h's f = exp(-1 / T_h), T_h log-spaced from
  // decay_time_min to decay_time_max over the heads; 0 and 0: f starts at sigmoid(0) = 1/2.
  double decay_time_min = 0;
  double decay_time_max = 0;
  void visit(FieldVisitor& v);
};

}  // namespace roformer::config
