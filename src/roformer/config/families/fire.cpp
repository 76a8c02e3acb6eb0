// FIRE's row and fields: its derived L and its parameter count.
#include "roformer/config/families/fire.h"

#include <string>

#include "roformer/config/families/family_rows.h"

namespace roformer::config {
namespace {

void resolve_fire(Config& c) {
  if (c.model.position.fire.l_init == 0) c.model.position.fire.l_init = c.data.seq_len;
}

double fire_parameters(const ModelConfig& m) {  // c, L_multiplier, and per side 1 -> W -> heads
  const FireConfig& f = m.position.fire;
  const double W = double(f.mlp_width), heads = double(m.num_heads), sides = m.objective == Objective::mlm ? 2 : 1;
  return (f.shared_layers ? 1 : layers(m)) * (2 + sides * (2 * W + W * heads + heads));
}

}  // namespace

void FireConfig::visit(FieldVisitor& v) {
  v.field("mlp_width", mlp_width, between(int64_t{1}, int64_t{4096}), "hidden width of the MLP f (FIRE: 32)");
  v.field("shared_layers", shared_layers, "one FIRE for all layers (default); false: one per layer");
  v.field("l_init", l_init, between(int64_t{0}, int64_t{1} << 40),
          "initial L of the normaliser psi(max(L, i)) (FIRE: 512); 0 = data.seq_len");
  v.field("init_c", init_c, between(1e-6, 1e6), "initial c of psi(x) = log(c x + 1) (FIRE: 0.1)");
}

PositionFamily fire_family() {
  PositionFamily f{PositionKind::fire, "fire",         {"model.position.fire."}, kPerLayerTermTraits, "", "", nullptr,
                   resolve_fire,       fire_parameters};
  f.runtime_settings = {"model.position.fire.l_init"};  // the threshold is a trained parameter; l_init only starts it
  return f;
}

}  // namespace roformer::config
