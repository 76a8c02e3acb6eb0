// CoPE's settings.
// The family's own file on the config floor: its struct and enums here, their fields and its row
// of the family table in cope.cpp.
#pragma once

#include <cstdint>

#include "roformer/config/field_visitor.h"

namespace roformer::config {

// CoPE (Golovneva et al. 2024): contextual positions p_ij = sum_{t=j..i} sigmoid(score_it),
// clamped to max_positions - 1; adds q_i . e[p_ij] (e interpolated between integer positions,
// one zero-initialised table [head_dim, max_positions] per layer). Causal attention only.
struct CopeConfig {
  int64_t max_positions = 0;  // npos; 0 resolves to data.seq_len
  void visit(FieldVisitor& v);
};

}  // namespace roformer::config
