// FIRE's settings.
// The family's own file on the config floor: its struct and enums here, their fields and its row
// of the family table in fire.cpp.
#pragma once

#include <cstdint>

#include "roformer/config/field_visitor.h"

namespace roformer::config {

// FIRE (Li et al., ICLR 2024): b(i, j) = f(psi(i - j) / psi(max(L, i))), psi(x) = log(c x + 1),
// f an MLP 1 -> mlp_width -> heads (ReLU), c and L = |L_multiplier * l_init| learned. Bidirectional
// attention: a second MLP for keys after the query, normalised by the farthest such key.
struct FireConfig {
  int64_t mlp_width = 32;     // the paper's hidden width
  bool shared_layers = true;  // one FIRE for every layer (as T5's bias); false: one per layer
  int64_t l_init = 0;         // L's initial value (the paper: 512); 0 resolves to data.seq_len
  double init_c = 0.1;        // c's initial value
  void visit(FieldVisitor& v);
};

}  // namespace roformer::config
