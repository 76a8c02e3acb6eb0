// The relative-bias families' rows and fields (T5's buckets; ALiBi has no settings).
#include "roformer/config/families/relative_bias.h"

#include <string>

#include "roformer/config/families/family_rows.h"

namespace roformer::config {
namespace {

void validate_t5(const Config& c, const Origins& o) {
  const T5BiasConfig& t = c.model.position.t5_bias;
  if (t.num_buckets % 2 != 0)
    invalid(o, "model.position.t5_bias.num_buckets",
            "must be even (bidirectional bucketing gives half the buckets to each direction)");
  // Bidirectional bucketing keeps num_buckets/4 exact distances; log buckets need room above.
  if (t.max_distance <= t.num_buckets / 2)
    conflict(o, "model.position.t5_bias.max_distance", "model.position.t5_bias.num_buckets",
             "max_distance must exceed num_buckets/2 so the logarithmic buckets are defined");
}

double t5_parameters(const ModelConfig& m) {
  return double(m.position.t5_bias.num_buckets) * double(m.num_heads);
}

}  // namespace

void T5BiasConfig::visit(FieldVisitor& v) {
  v.field("num_buckets", num_buckets, at_least(int64_t{2}), "relative-position buckets (T5: 32)");
  v.field("max_distance", max_distance, at_least(int64_t{2}), "distances beyond this share the last bucket (T5: 128)");
}

PositionFamily t5_bias_family() {
  return {PositionKind::t5_bias, "t5_bias",  {"model.position.t5_bias."},
          kOffsetTraits,         kOffsetRow, "",
          validate_t5,           nullptr,    t5_parameters};
}

PositionFamily alibi_family() {
  return {PositionKind::alibi, "alibi", {}, kOffsetTraits, kOffsetRow, "", nullptr, nullptr, nullptr};
}

}  // namespace roformer::config
