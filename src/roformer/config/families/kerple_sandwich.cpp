// KERPLE's and Sandwich's rows and fields.
#include "roformer/config/families/kerple_sandwich.h"

#include <string>

#include "roformer/config/families/family_rows.h"

namespace roformer::config {
namespace {

void validate_sandwich(const Config& c, const Origins& o) {
  const int64_t head_dim = c.model.head_dim();
  if (c.model.position.sandwich.resolved_dim(head_dim) % 2 != 0)
    invalid(o, "model.position.sandwich.dim",
            "d' (0 means the head dimension, " + std::to_string(head_dim) +
                ") must be even: the sinusoids come in d'/2 frequencies");
}

void resolve_sandwich(Config& c) {
  c.model.position.sandwich.dim = c.model.position.sandwich.resolved_dim(c.model.head_dim());
}

double kerple_parameters(const ModelConfig& m) {
  return 2 * double(m.num_heads);
}  // r1, r2

}  // namespace

void KerpleConfig::visit(FieldVisitor& v) {
  static const EnumNames<KerpleVariant> variants{{{KerpleVariant::log, "log"}, {KerpleVariant::power, "power"}}};
  enum_field(v, "variant", variant, variants, "log: -r1 log(1 + r2 |i-j|); power: -r1 |i-j|^r2");
}

void SandwichConfig::visit(FieldVisitor& v) {
  v.field("dim", dim, between(int64_t{0}, int64_t{4096}),
          "d' of the sinusoidal inner product (even); 0 = the head dimension");
}

PositionFamily kerple_family() {
  return {PositionKind::kerple, "kerple", {"model.position.kerple."}, kOffsetTraits, kOffsetRow, "", nullptr, nullptr,
          kerple_parameters};
}

PositionFamily sandwich_family() {
  return {PositionKind::sandwich, "sandwich",       {"model.position.sandwich."},
          kOffsetTraits,          kOffsetRow,       "",
          validate_sandwich,      resolve_sandwich, nullptr};
}

}  // namespace roformer::config
