// The relative-term families' rows and fields (Shaw, Transformer-XL, DeBERTa): their checks
// and parameter counts.
#include "roformer/config/families/relative_terms.h"

#include <string>

#include "roformer/config/families/family_rows.h"

namespace roformer::config {
namespace {

void validate_transformer_xl(const Config& c, const Origins& o) {
  require_heads_fill_the_width(c, o, "Transformer-XL");
  if (c.model.hidden_size % 2 != 0)
    invalid(o, "model.hidden_size",
            "Transformer-XL's sinusoidal relative encodings pair sin and cos over the width, so it must be even");
}

void validate_deberta(const Config& c, const Origins& o) {
  require_heads_fill_the_width(c, o, "DeBERTa");
  const DebertaConfig& d = c.model.position.deberta;
  if (d.max_relative_positions > 0 && d.max_relative_positions <= d.position_buckets)
    conflict(o, "model.position.deberta.max_relative_positions", "model.position.deberta.position_buckets",
             "log buckets start at position_buckets/2 and must end beyond position_buckets; raise "
             "max_relative_positions or set it to 0 for a linear clip");
}

double shaw_parameters(const ModelConfig& m) {  // w^K (and w^V), per layer or shared
  const ShawConfig& s = m.position.shaw;
  return (s.per_layer ? layers(m) : 1) * double(2 * s.max_distance + 1) * double(m.head_dim()) * (s.values ? 2 : 1);
}

double transformer_xl_parameters(const ModelConfig& m) {  // W_kr, u, v per layer
  const double H = double(m.hidden_size);
  return layers(m) * (H * H + 2 * H);
}

double deberta_parameters(const ModelConfig& m) {  // P, and W_k,r and W_q,r per layer
  const double H = double(m.hidden_size);
  return double(2 * m.position.deberta.position_buckets) * H + layers(m) * 2 * (H * H + H);
}

}  // namespace

void ShawConfig::visit(FieldVisitor& v) {
  v.field("max_distance", max_distance, between(int64_t{1}, int64_t{1} << 20),
          "clip distance k: 2k+1 relative embeddings (Shaw: 16)");
  v.field("per_layer", per_layer, "one relative table per layer (the paper); false: shared by all layers");
  v.field("values", values, "also add the relative value term a^V_ij to the attention output");
}

void DebertaConfig::visit(FieldVisitor& v) {
  v.field("position_buckets", position_buckets, between(int64_t{2}, int64_t{1} << 20),
          "k: 2k relative embeddings, distances clipped to (-k, k) after bucketing");
  v.field("max_relative_positions", max_relative_positions, between(int64_t{0}, int64_t{1} << 40),
          "log buckets beyond k/2 reach the outermost bucket at this distance (DeBERTa-v2); 0: linear clip at k");
}

PositionFamily shaw_family() {
  return {PositionKind::shaw, "shaw", {"model.position.shaw."}, kPerLayerTermTraits, "", "", nullptr, nullptr,
          shaw_parameters};
}

PositionFamily transformer_xl_family() {
  return {
      PositionKind::transformer_xl, "transformer_xl", {}, kPerLayerTermTraits, "", "", validate_transformer_xl, nullptr,
      transformer_xl_parameters};
}

PositionFamily deberta_family() {
  return {PositionKind::deberta, "deberta", {"model.position.deberta."}, kPerLayerTermTraits, "", "",
          validate_deberta,      nullptr,   deberta_parameters};
}

}  // namespace roformer::config
