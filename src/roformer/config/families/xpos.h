// xPos's settings (its rotation is RoPE's: model.position.rope).
// The family's own file on the config floor: its struct and enums here, their fields and its row
// of the family table in xpos.cpp.
#pragma once

#include <cstdint>

#include "roformer/config/field_visitor.h"

namespace roformer::config {

// xPos (Sun et al. 2023): RoPE (model.position.rope settings) with q scaled per pair by
// zeta_i^(m/scale_base) and k by zeta_i^(-n/scale_base), zeta_i = (2i/d + gamma)/(1 + gamma).
struct XposConfig {
  double scale_base = 512.0;
  double gamma = 0.4;
  void visit(FieldVisitor& v);
};

}  // namespace roformer::config
