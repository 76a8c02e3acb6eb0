// Per-layer layouts: which layers are local and which global, and what each kind of layer runs
// with (position family, attention window, RoPE base, temperature, QK-norm). The presets:
//   irope      LLLG    local: the model's family, chunked window, QK-norm; global: NoPE with
//                      Llama 4's temperature (transformers' Llama4TextConfig: no_rope_layers,
//                      attention_chunk_size, attn_temperature_tuning, use_qk_norm)
//   rnope_swa  LLLG    local: the model's family, sliding window; global: NoPE (Command A)
//   gemma3     LLLLLG  local: sliding window, RoPE base 10k; global: RoPE base 1M (Gemma3TextConfig)
//   custom     the pattern and every kind's keys as set (auto: the model's family, sliding
//              local windows, no temperature, model.qk_norm)
// The window's size is ours to default (a quarter of the training length; the papers use
// 1k-8k-token windows at 8k-256k contexts).
#pragma once

#include <cstdint>
#include <string>

#include "roformer/config/config.h"
#include "roformer/config/config_loader.h"

namespace roformer::config {

const EnumNames<LayoutPreset>& layout_preset_names();
const EnumNames<WindowKind>& window_kind_names();

// Cross-field checks of model.layout (config_validate.cpp calls it): a preset of none sets no
// other layout key, a window needs a size and a family acting inside attention, and so on.
void validate_layout(const Config& c, const Origins& o);
// Writes the preset's values into every `auto` key (nothing without a layout).
void resolve_layout(Config& c);

bool has_layout(const ModelConfig& m);
// True when layer `layer` is a global layer of the (resolved) layout; false without a layout.
bool is_global_layer(const ModelConfig& m, int64_t layer);
// The model configuration that layers of one kind run with: the kind's position family, RoPE
// base, QK-norm and temperature written into a copy of `m` (whose layout is resolved), layout
// cleared. Without a layout, `m` itself.
ModelConfig layer_model(const ModelConfig& m, bool global);
// The attention window of one kind: its kind (none, sliding or chunked) and size in tokens.
struct AttentionWindowSpec {
  WindowKind kind = WindowKind::none;
  int64_t size = 0;
};
AttentionWindowSpec layer_window(const ModelConfig& m, bool global);
// One line for summaries and eval headers, e.g. "irope (LLLG: local rope chunked 32; global none
// llama4)"; "" without a layout.
std::string describe_layout(const ModelConfig& m);

}  // namespace roformer::config
