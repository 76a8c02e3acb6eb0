// CoPE's row and fields: its derived table length and its parameter count.
#include "roformer/config/families/cope.h"

#include <string>

#include "roformer/config/families/family_rows.h"

namespace roformer::config {
namespace {

void resolve_cope(Config& c) {
  if (c.model.position.cope.max_positions == 0) c.model.position.cope.max_positions = c.data.seq_len;
}

double cope_parameters(const ModelConfig& m) {  // e per layer
  return layers(m) * double(m.head_dim()) * double(m.position.cope.max_positions);
}

}  // namespace

void CopeConfig::visit(FieldVisitor& v) {
  v.field("max_positions", max_positions, between(int64_t{0}, int64_t{1} << 20),
          "contextual positions 0..N-1 (counts clamp at N-1); 0 = data.seq_len");
}

PositionFamily cope_family() {
  return {PositionKind::cope,
          "cope",
          {"model.position.cope."},
          kPerLayerOffsetTraits,
          "CoPE counts its positions from the context, not from token indices",
          "CoPE counts the keys between a key and its query, which the authors define for causal attention only",
          nullptr,
          resolve_cope,
          cope_parameters};
}

}  // namespace roformer::config
