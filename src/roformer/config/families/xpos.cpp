// xPos's row and fields (its rotation checks are RoPE's).
#include "roformer/config/families/xpos.h"

#include <string>

#include "roformer/config/families/family_rows.h"

namespace roformer::config {
void XposConfig::visit(FieldVisitor& v) {
  v.field("scale_base", scale_base, above(0.0), "exponent divisor: q scaled by zeta^(m/scale_base) (xPos: 512)");
  v.field("gamma", gamma, above(0.0), "zeta_i = (2i/d + gamma) / (1 + gamma) (xPos: 0.4)");
}

PositionFamily xpos_family() {
  return {PositionKind::xpos,  "xpos",  {"model.position.rope.", "model.position.xpos."},
          {true, false, true}, "",      "",
          validate_rotary,     nullptr, nullptr};
}

}  // namespace roformer::config
