// The absolute families' rows (sinusoidal, learned) and kind none's: the learned table's
// length limit, checks and parameters.
#include <string>

#include "roformer/config/families/family_rows.h"

namespace roformer::config {
namespace {

void validate_learned(const Config& c, const Origins& o) {
  const PositionConfig& p = c.model.position;
  if (c.data.seq_len > p.max_positions)
    conflict(o, "data.seq_len", "model.position.max_positions",
             "a learned position table of " + std::to_string(p.max_positions) + " rows cannot train on length " +
                 std::to_string(c.data.seq_len) + "; raise max_positions or lower seq_len");
  const int64_t drawn_below = resolved_random_positions_max(c);
  if (c.train.positions == PositionSampling::random && p.max_positions < drawn_below)
    conflict(o, "train.random_positions_max", "model.position.max_positions",
             "positions are drawn below " + std::to_string(drawn_below) + " but the learned table has " +
                 std::to_string(p.max_positions) + " rows; raise max_positions or lower the maximum");
}

double learned_parameters(const ModelConfig& m) {
  return double(m.position.max_positions) * double(m.embed_dim());
}

int64_t learned_rows(const ModelConfig& m) {
  return m.position.max_positions;
}

}  // namespace

PositionFamily sinusoidal_family() {
  return {PositionKind::sinusoidal, "sinusoidal", {}, kEmbeddingTraits, "", "", nullptr, nullptr, nullptr};
}

PositionFamily learned_family() {
  return {PositionKind::learned, "learned", {"model.position.max_positions"},
          kEmbeddingTraits,      "",        "",
          validate_learned,      nullptr,   learned_parameters,
          learned_rows};
}

PositionFamily none_family() {
  return {PositionKind::none,
          "none",
          {},
          {false, true, false},
          "kind none has no positions to randomise",
          "",
          nullptr,
          nullptr,
          nullptr};
}

}  // namespace roformer::config
