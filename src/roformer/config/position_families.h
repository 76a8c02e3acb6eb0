// One row per position family: what the rest of the project may ask about a family without
// naming it. The validator, the resolver, the memory estimate, the checkpoint's rule for
// settings of an unused family and `config check` read these rows. Each family's row is its
// kind_family() in its own file in families/; the table is built from the list of families
// (families/family_list.h, which docs/position-encodings.md's checklist describes).
#pragma once

#include <string>
#include <vector>

#include "roformer/config/config.h"
#include "roformer/config/config_loader.h"

namespace roformer::config {

struct PositionTraits {
  bool explicit_positions = false;  // reads each token's position: randomized positions reach it
  bool linear_attention = false;    // reaches attention only through features or embeddings
  bool rotary = false;              // rotates q and k with RoPE's tables (rope.* settings apply)
  bool context_extension = false;   // RoPE's evaluation-time extension methods are defined for it
  bool per_layer = false;           // has parameters per layer (a layout cannot leave layers without it)
  bool embeds = false;              // adds to the token embeddings, outside attention
};

struct PositionFamily {
  PositionKind kind;
  std::string name;                   // model.position.kind's value (position_kind_names() reads the rows)
  std::vector<std::string> settings;  // config key prefixes of its own settings ("model.position.fire.")
  PositionTraits traits;
  // Why randomized positions cannot reach it, when they cannot (!traits.explicit_positions).
  std::string no_random_positions;
  // Why it needs causal attention, when it does (empty: any objective).
  std::string causal_only;
  void (*validate)(const Config&, const Origins&) = nullptr;  // its own cross-field checks
  void (*resolve)(Config&) = nullptr;                         // its defaults derived from other keys
  double (*parameters)(const ModelConfig&) = nullptr;         // its own trainable parameters
  int64_t (*length_limit)(const ModelConfig&) = nullptr;      // positions it has a row for (none: no limit)
  // Key prefixes of its settings that change the speed or the start of training, not the trained
  // function (a checkpoint loads under other values: kernels, evaluation-time methods, inits).
  std::vector<std::string> runtime_settings;
  // Checks of its settings made whatever the model's family is: a setting only it reads, set for a
  // model of another family, is refused rather than ignored.
  void (*validate_settings)(const Config&, const Origins&) = nullptr;
};

const std::vector<PositionFamily>& position_families();  // in PositionKind order

// Each family's row, defined in its file in families/ (declared from the list of families).
#define ROFORMER_POSITION_ROW_DECLARATION(kind) PositionFamily kind##_family();
ROFORMER_POSITION_FAMILIES(ROFORMER_POSITION_ROW_DECLARATION)
#undef ROFORMER_POSITION_ROW_DECLARATION
const PositionFamily& position_family(PositionKind kind);

// "a, b or c": the names of the families whose traits pass `keep`, in PositionKind order.
std::string family_names(bool (*keep)(const PositionTraits&));

// True when some family lists `key` among its runtime settings (it does not describe the trained
// function).
bool is_runtime_setting(const std::string& key);

// True when `key` is a setting of a family other than `kind` (such settings do not describe
// the trained function of a model of `kind`).
bool belongs_to_unused_family(const std::string& key, PositionKind kind);

// The largest train.random_positions_max: float32 positions stay exact below 2^24.
inline constexpr int64_t kMaxRandomPositions = int64_t{1} << 24;
// train.random_positions_max after resolution: as set, or the longest evaluation length, at
// least twice the training length (so random draws reach past it), at most kMaxRandomPositions.
int64_t resolved_random_positions_max(const Config& c);

// The longest sequence the family can encode (a learned table's rows), or 0 for no limit.
int64_t position_length_limit(const ModelConfig& m);

// The family's own parameter count (0 for parameter-free families).
double position_parameters(const ModelConfig& m);

}  // namespace roformer::config
