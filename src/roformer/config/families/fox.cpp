// FoX's row and fields: its RoPE switch's checks and its parameter count.
#include "roformer/config/families/fox.h"

#include <string>

#include "roformer/config/families/family_rows.h"

namespace roformer::config {
namespace {

// FoX's RoPE switch brings RoPE's settings and their checks.
void validate_fox(const Config& c, const Origins& o) {
  if (c.model.position.fox.rope) validate_rotary(c, o);
}

double fox_parameters(const ModelConfig& m) {  // the forget gate per layer: w [heads, hidden] and b, or b alone
  const double heads = double(m.num_heads);
  return layers(m) * (m.position.fox.gate == FoxGate::data ? heads * double(m.hidden_size) + heads : heads);
}

}  // namespace

void FoxConfig::visit(FieldVisitor& v) {
  static const EnumNames<FoxGate> gates{{{FoxGate::data, "data"}, {FoxGate::bias_only, "bias_only"}}};
  enum_field(v, "gate", gate, gates,
             "data: f_t = sigmoid(w . x_t + b) per head (FoX); bias_only: one learned f per head, the data-independent "
             "ablation (ALiBi with a learned slope)");
  v.field("rope", rope, "also rotate q and k with model.position.rope (FoX: off)");
}

PositionFamily fox_family() {
  return {PositionKind::fox,
          "fox",
          {"model.position.fox.", "model.position.rope."},
          kPerLayerOffsetTraits,
          "FoX's decay comes from the tokens' forget gates, not from their positions",
          "",
          validate_fox,
          nullptr,
          fox_parameters};
}

}  // namespace roformer::config
