// KERPLE's and Sandwich's settings.
// The family's own file on the config floor: its struct and enums here, their fields and its row
// of the family table in kerple_sandwich.cpp.
#pragma once

#include <cstdint>

#include "roformer/config/field_visitor.h"

namespace roformer::config {

enum class KerpleVariant { log, power };

// KERPLE (Chi et al., NeurIPS 2022): per-head r1, r2 > 0 (clamped to >= 0.01 each pass, the
// power exponent also to <= 2, as the authors' code does), shared by the layers:
// log: -r1 log(1 + r2 |i - j|); power: -r1 |i - j|^r2.
struct KerpleConfig {
  KerpleVariant variant = KerpleVariant::log;
  void visit(FieldVisitor& v);
};

// Sandwich (Chi et al., ACL 2023), parameter-free:
// b_h(i, j) = [sum_{k=1..d'/2} cos((i - j) / 10000^(2k/d')) - d'/2] / (8 h / H), h = 1..H.
struct SandwichConfig {
  int64_t dim = 0;  // d' (even); 0 resolves to the head dimension (NeMo's choice)
  // dim 0 means the head dimension: the one place that rule is applied.
  int64_t resolved_dim(int64_t head_dim) const { return dim > 0 ? dim : head_dim; }
  void visit(FieldVisitor& v);
};

}  // namespace roformer::config
