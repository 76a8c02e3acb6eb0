// Which RoPE settings a Hugging Face format can hold (see rope_fit.h).
#include "roformer/convert/rope_fit.h"

#include "roformer/config/config_loader.h"

namespace roformer::convert {

std::string rope_settings_beyond(const config::Config& cfg, config::RopeConfig format, const std::string& name) {
  const config::RopeConfig& r = cfg.model.position.rope;
  format.impl = r.impl;
  format.cos_sin_table = r.cos_sin_table;
  if (r.rotary_dim == cfg.model.head_dim()) format.rotary_dim = r.rotary_dim;
  if (r.scaling.kind == config::RopeScalingKind::none) format.scaling = r.scaling;
  if (r.mode == config::RopeMode::rotate) {
    format.rerope = r.rerope;
    format.string = r.string;
    format.self_extend = r.self_extend;
    format.dual_chunk = r.dual_chunk;
  }
  config::Config held = cfg;
  held.model.position.rope = format;
  const auto ours = config::flatten(cfg);
  const auto theirs = config::flatten(held);
  std::string beyond;
  for (size_t i = 0; i < ours.size(); ++i) {
    if (ours[i].first.rfind("model.position.rope.", 0) != 0 || ours[i].second == theirs[i].second) continue;
    beyond += (beyond.empty() ? "" : ", ") + ours[i].first + " " + ours[i].second + " (" + name + ": " +
              theirs[i].second + ")";
  }
  return beyond;
}

}  // namespace roformer::convert
