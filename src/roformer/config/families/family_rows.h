// What the families' files on the config floor share (included by them and the table only): the
// trait presets their rows use, the layer count as a double, the offset-row refusal, RoPE's
// checks (xPos and FoX's RoPE switch bring them).
#pragma once

#include <string>

#include "roformer/config/config.h"
#include "roformer/config/config_errors.h"
#include "roformer/config/config_loader.h"
#include "roformer/config/position_families.h"

namespace roformer::config {

// {explicit positions, linear attention, rotary, context extension, per layer, embeds}
inline constexpr PositionTraits kRotaryTraits{true, true, true, true};
inline constexpr PositionTraits kEmbeddingTraits{true, true, false, false, false, true};
inline constexpr PositionTraits kPerLayerTermTraits{true, false, false, false, true};
inline constexpr PositionTraits kOffsetTraits{false, false, false};
inline constexpr PositionTraits kPerLayerOffsetTraits{false, false, false, false, true};

// Why randomized positions cannot reach a bias of one offset row.
inline const char* const kOffsetRow = "this family's bias is one row of offsets for positions 0..S-1 per pass";

// Layer counts in parameter estimates are doubles: absurd sizes give an absurd estimate, not a
// wrapped integer.
inline double layers(const ModelConfig& m) {
  return double(m.num_layers);
}

// RoPE's checks of its own settings (families/rope.cpp).
void validate_rotary(const Config& c, const Origins& o);

// A family whose projections make a term of the model's width, split into the heads: its heads
// must fill that width (model.head_dim 0, or hidden_size / num_heads).
inline void require_heads_fill_the_width(const Config& c, const Origins& o, const std::string& family) {
  const ModelConfig& m = c.model;
  if (m.explicit_head_dim > 0 && m.attention_width() != m.hidden_size)
    conflict(o, "model.head_dim", "model.position.kind",
             family + " projects the hidden states to terms split over the heads, so num_heads x head_dim (" +
                 std::to_string(m.attention_width()) + ") must equal hidden_size (" + std::to_string(m.hidden_size) +
                 "); set head_dim 0 or hidden_size / num_heads");
}

}  // namespace roformer::config
