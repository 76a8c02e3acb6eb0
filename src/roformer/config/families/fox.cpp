// FoX's row and fields: its RoPE switch's checks and its parameter count.
#include "roformer/config/families/fox.h"

#include <string>

#include "roformer/config/families/family_rows.h"

namespace roformer::config {
namespace {

// FoX's RoPE switch brings RoPE's settings and their checks.
void validate_fox(const Config& c, const Origins& o) {
  const FoxConfig& fox = c.model.position.fox;
  if (fox.rope) validate_rotary(c, o);
  if ((fox.decay_time_min > 0) != (fox.decay_time_max > 0))
    conflict(o, "model.position.fox.decay_time_min", "model.position.fox.decay_time_max",
             "the decay-time initialisation needs both ends of its range (or neither)");
  if (fox.decay_time_min > 0 && fox.gate != FoxGate::bias_only)
    conflict(o, "model.position.fox.decay_time_min", "model.position.fox.gate",
             "the decay times initialise the data-independent gate's bias, as the authors' fgate_bias_init does "
             "(their data-dependent gate refuses it); set model.position.fox.gate=bias_only or drop the decay times");
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
  v.field("decay_time_min", decay_time_min, at_least(0.0),
          "gate bias_only: the authors' decay-time initialisation, head h's gate exp(-1/T_h) with T_h log-spaced from "
          "decay_time_min to decay_time_max (tokens); 0 with decay_time_max 0: the gates start at 1/2");
  v.field("decay_time_max", decay_time_max, at_least(0.0),
          "gate bias_only: the longest decay time (see decay_time_min)");
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
