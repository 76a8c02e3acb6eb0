// The settings of the families with relative score terms: Shaw's tables and DeBERTa's buckets
// (Transformer-XL has none).
// The family's own file on the config floor: its struct and enums here, their fields and its row
// of the family table in relative_terms.cpp.
#pragma once

#include <cstdint>

#include "roformer/config/field_visitor.h"

namespace roformer::config {

// Shaw et al. 2018: learned relative key (and value) embeddings for distances clipped to
// [-max_distance, max_distance], shared by the heads.
struct ShawConfig {
  int64_t max_distance = 16;  // k: distances beyond it share the outermost embedding
  bool per_layer = true;      // one table per layer (the paper) or one for all layers
  bool values = true;         // also the value term a^V (the paper's Eq. 3); false: keys only
  void visit(FieldVisitor& v);
};

// DeBERTa (He et al. 2021): relative embeddings P [2k, hidden], content-to-position and
// position-to-content terms, scores scaled by 1/sqrt(3d); DeBERTa-v2 log buckets beyond k/2.
struct DebertaConfig {
  int64_t position_buckets = 32;         // k: relative distances map to 2k embeddings
  int64_t max_relative_positions = 512;  // log buckets reach the outermost one at this distance; 0: linear clip
  void visit(FieldVisitor& v);
};

}  // namespace roformer::config
