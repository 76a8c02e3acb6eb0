// Which RoPE settings a Hugging Face format can hold, derived from the config's own fields: every
// key under model.position.rope that differs from the format's rotation is named, so a RoPE
// setting added later is refused by the converters until one of them maps it.
#pragma once

#include <string>

#include "roformer/config/config.h"

namespace roformer::convert {

// The settings of cfg's RoPE that `format` (the format's rotation: cfg's RoPE with every setting
// the format holds copied in, the rest at their defaults) lacks, as "key value (NAME: its value)",
// comma-separated; "" when it holds them all. Not compared, because they do not change what the
// model computes: the kernel choices, a rotary_dim equal to the head, the settings of a scaling
// that is off and of the remaps while rope.mode is rotate.
std::string rope_settings_beyond(const config::Config& cfg, config::RopeConfig format, const std::string& name);

}  // namespace roformer::convert
