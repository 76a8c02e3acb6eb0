// T5's relative bias settings (ALiBi has none).
// The family's own file on the config floor: its struct and enums here, their fields and its row
// of the family table in relative_bias.cpp.
#pragma once

#include <cstdint>

#include "roformer/config/field_visitor.h"

namespace roformer::config {

struct T5BiasConfig {
  int64_t num_buckets = 32;
  int64_t max_distance = 128;
  void visit(FieldVisitor& v);
};

}  // namespace roformer::config
