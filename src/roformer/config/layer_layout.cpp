// Per-layer layouts: the presets, their resolution, their checks and the per-layer queries
// (see layer_layout.h).
#include "roformer/config/layer_layout.h"

#include <algorithm>
#include <sstream>

#include "roformer/config/config_errors.h"
#include "roformer/config/position_families.h"

namespace roformer::config {
namespace {

const EnumNames<LayerPosition>& layer_position_names() {
  static const EnumNames<LayerPosition> n{
      {{LayerPosition::auto_, "auto"}, {LayerPosition::model, "model"}, {LayerPosition::none, "none"}}};
  return n;
}
const EnumNames<LayerTemperature>& temperature_names() {
  static const EnumNames<LayerTemperature> n{
      {{LayerTemperature::auto_, "auto"}, {LayerTemperature::none, "none"}, {LayerTemperature::llama4, "llama4"}}};
  return n;
}
const EnumNames<LayerToggle>& toggle_names() {
  static const EnumNames<LayerToggle> n{
      {{LayerToggle::auto_, "auto"}, {LayerToggle::on, "on"}, {LayerToggle::off, "off"}}};
  return n;
}

struct Preset {
  std::string pattern;
  LayerKindConfig local, global;
};

// The presets' values; `auto` left in a preset resolves as for custom.
Preset preset_values(LayoutPreset p) {
  using P = LayerPosition;
  using W = WindowKind;
  using T = LayerTemperature;
  using Q = LayerToggle;
  switch (p) {
    case LayoutPreset::irope:  // Llama 4: three chunked RoPE layers with QK-norm, one NoPE layer with the temperature
      return {"LLLG", {P::model, W::chunked, 0, 0.0, T::none, Q::on}, {P::none, W::none, 0, 0.0, T::llama4, Q::off}};
    case LayoutPreset::rnope_swa:  // Command A: three sliding-window RoPE layers, one global NoPE layer
      return {"LLLG", {P::model, W::sliding, 0, 0.0, T::none, Q::auto_}, {P::none, W::none, 0, 0.0, T::none, Q::auto_}};
    case LayoutPreset::gemma3:  // five sliding layers at base 10k, one global at base 1M, QK-norm everywhere
      return {"LLLLLG", {P::model, W::sliding, 0, 1e4, T::none, Q::on}, {P::model, W::none, 0, 1e6, T::none, Q::on}};
    case LayoutPreset::none:
    case LayoutPreset::custom:
      break;
  }
  return {"", {P::model, W::sliding, 0, 0.0, T::none, Q::auto_}, {P::model, W::none, 0, 0.0, T::none, Q::auto_}};
}

// `kind` with its auto values taken from the preset's `preset_kind`, then from the model.
LayerKindConfig resolve_kind(LayerKindConfig kind, const LayerKindConfig& preset_kind, const Config& c) {
  const ModelConfig& m = c.model;
  if (kind.position == LayerPosition::auto_) kind.position = preset_kind.position;
  if (kind.window_kind == WindowKind::auto_) kind.window_kind = preset_kind.window_kind;
  if (kind.temperature == LayerTemperature::auto_) kind.temperature = preset_kind.temperature;
  if (kind.qk_norm == LayerToggle::auto_) kind.qk_norm = preset_kind.qk_norm;
  if (kind.qk_norm == LayerToggle::auto_) kind.qk_norm = m.qk_norm ? LayerToggle::on : LayerToggle::off;
  if (kind.rope_scaling == LayerToggle::auto_) kind.rope_scaling = LayerToggle::on;
  if (kind.window == 0 && kind.window_kind != WindowKind::none) kind.window = std::max<int64_t>(1, c.data.seq_len / 4);
  const bool rotary = kind.position == LayerPosition::model && position_family(m.position.kind).traits.rotary;
  if (kind.rope_base == 0.0)
    kind.rope_base = rotary && preset_kind.rope_base > 0 ? preset_kind.rope_base : m.position.rope.base;
  return kind;
}

LayoutConfig resolved(const Config& c) {
  LayoutConfig l = c.model.layout;
  if (l.preset == LayoutPreset::none) return l;
  const Preset p = preset_values(l.preset);
  if (l.pattern.empty()) l.pattern = p.pattern;
  l.local = resolve_kind(l.local, p.local, c);
  l.global = resolve_kind(l.global, p.global, c);
  return l;
}

bool kind_is_auto(const LayerKindConfig& k) {
  return k.position == LayerPosition::auto_ && k.window_kind == WindowKind::auto_ && k.window == 0 &&
         k.rope_base == 0.0 && k.temperature == LayerTemperature::auto_ && k.qk_norm == LayerToggle::auto_ &&
         k.rope_scaling == LayerToggle::auto_;
}

void validate_pattern(const Config& c, const Origins& o, const LayoutConfig& l) {
  const std::string key = "model.layout.pattern";
  if (l.pattern.empty())
    invalid(o, key,
            "preset custom needs a pattern of L (local) and G (global) layers, cycled over the layers, e.g. LLLG");
  if (l.pattern.find_first_not_of("LG") != std::string::npos)
    invalid(o, key, "'" + l.pattern + "' may hold only L (a local layer) and G (a global layer)");
  bool global = false;
  for (int64_t i = 0; i < c.model.num_layers; ++i) global |= l.pattern[i % l.pattern.size()] == 'G';
  if (!global && l.preset != LayoutPreset::custom)
    conflict(o, key, "model.num_layers",
             "the preset's pattern " + l.pattern + " has no global layer among " + std::to_string(c.model.num_layers) +
                 " layers; use at least " + std::to_string(l.pattern.size()) +
                 " layers, or preset custom with a shorter pattern (e.g. LG)");
}

void validate_kind(const Config& c, const Origins& o, const std::string& name, const LayerKindConfig& raw,
                   const LayerKindConfig& k) {
  const ModelConfig& m = c.model;
  const std::string prefix = "model.layout." + name + ".";
  const PositionFamily& family = position_family(m.position.kind);
  if (k.window_kind == WindowKind::none && raw.window > 0)
    invalid(o, prefix + "window",
            "is set but this kind has no window (window_kind none); set window_kind sliding or chunked");
  // (A resolved config holds model.position.rope.base there.)
  const bool own_base = raw.rope_base > 0 && raw.rope_base != m.position.rope.base;
  if (own_base && (k.position == LayerPosition::none || !family.traits.rotary))
    conflict(o, prefix + "rope_base", "model.position.kind",
             "a RoPE base applies to layers that rotate (rope or xpos as the model's family, position model)");
  if (raw.rope_scaling == LayerToggle::off && (k.position == LayerPosition::none || !family.traits.rotary))
    conflict(o, prefix + "rope_scaling", "model.position.kind",
             "a RoPE scaling applies to layers that rotate (rope or xpos as the model's family, position model)");
  if (k.position == LayerPosition::none && family.traits.per_layer)
    conflict(o, prefix + "position", "model.position.kind",
             family.name +
                 " has parameters in every layer, which layers without it would leave untrained; use a "
                 "family without per-layer parameters (rope, alibi, t5_bias, kerple, xpos, ...)");
  if (k.temperature == LayerTemperature::llama4 && m.attention_scale != AttentionScale::none)
    conflict(o, prefix + "temperature", "model.attention_scale",
             "both scale the queries; the layout's temperature applies to its layers only: set attention_scale none");
}

}  // namespace

const EnumNames<LayoutPreset>& layout_preset_names() {
  static const EnumNames<LayoutPreset> n{{{LayoutPreset::none, "none"},
                                          {LayoutPreset::custom, "custom"},
                                          {LayoutPreset::irope, "irope"},
                                          {LayoutPreset::rnope_swa, "rnope_swa"},
                                          {LayoutPreset::gemma3, "gemma3"}}};
  return n;
}

const EnumNames<WindowKind>& window_kind_names() {
  static const EnumNames<WindowKind> n{{{WindowKind::auto_, "auto"},
                                        {WindowKind::none, "none"},
                                        {WindowKind::sliding, "sliding"},
                                        {WindowKind::chunked, "chunked"}}};
  return n;
}

void LayerKindConfig::visit(FieldVisitor& v) {
  enum_field(v, "position", position, layer_position_names(),
             "auto (the preset's), model (model.position) or none (NoPE in these layers)");
  enum_field(v, "window_kind", window_kind, window_kind_names(),
             "auto (the preset's), none, sliding (causal: the last `window` keys, the query's own included; "
             "bidirectional: keys within `window` of the query) or chunked (keys in the query's chunk of `window`)");
  v.field("window", window, between(int64_t{0}, int64_t{1} << 40),
          "the window or chunk in tokens; 0 = a quarter of data.seq_len where the kind has a window");
  v.field("rope_base", rope_base, between(0.0, 1e15),
          "the RoPE base of these layers; 0 = the preset's (gemma3: 10000 local, 1000000 global), else "
          "model.position.rope.base");
  enum_field(v, "temperature", temperature, temperature_names(),
             "auto (the preset's), none, or llama4 (Llama 4's temperature on these layers' queries, with "
             "model.attention_scale_floor and attention_scale_factor)");
  enum_field(v, "qk_norm", qk_norm, toggle_names(), "auto (the preset's, else model.qk_norm), on or off");
  enum_field(v, "rope_scaling", rope_scaling, toggle_names(),
             "auto or on (these layers rotate with model.position.rope.scaling) or off (without it: Gemma 3 4B+ "
             "scales its global layers only)");
}

void LayoutConfig::visit(FieldVisitor& v) {
  enum_field(v, "preset", preset, layout_preset_names(),
             "none (every layer alike), custom (the keys below), irope (Llama 4: LLLG, chunked RoPE layers with "
             "QK-norm, a NoPE layer with the temperature), rnope_swa (Command A: LLLG, sliding-window RoPE, global "
             "NoPE) or gemma3 (LLLLLG, sliding base 10k, global base 1M, QK-norm)");
  v.field("pattern", pattern, "L (local) and G (global) per layer, cycled over the layers; \"\" = the preset's");
  v.section(
      "local", [this](FieldVisitor& s) { local.visit(s); }, "the local layers (L)");
  v.section(
      "global", [this](FieldVisitor& s) { global.visit(s); }, "the global layers (G)");
}

void validate_layout(const Config& c, const Origins& o) {
  const LayoutConfig& raw = c.model.layout;
  if (raw.preset == LayoutPreset::none) {
    const char* set = !raw.pattern.empty()        ? "model.layout.pattern"
                      : !kind_is_auto(raw.local)  ? "model.layout.local"
                      : !kind_is_auto(raw.global) ? "model.layout.global"
                                                  : nullptr;
    if (set)
      conflict(o, "model.layout.preset", set,
               "a layout key is set but the preset is none; choose custom, irope, rnope_swa or gemma3");
    return;
  }
  const ModelConfig& m = c.model;
  const PositionFamily& family = position_family(m.position.kind);
  if (m.attention != AttentionKind::softmax)
    conflict(o, "model.layout.preset", "model.attention",
             "windows and per-layer families act on the score matrix, which linear attention never forms");
  if (family.traits.embeds)
    conflict(o, "model.layout.preset", "model.position.kind",
             family.name +
                 " adds positions to the embeddings once, before every layer; a layout chooses per layer, "
                 "so use a family inside attention (rope, alibi, ...)");
  const LayoutConfig l = resolved(c);
  validate_pattern(c, o, l);
  validate_kind(c, o, "local", raw.local, l.local);
  validate_kind(c, o, "global", raw.global, l.global);
}

void resolve_layout(Config& c) {
  c.model.layout = resolved(c);
}

bool has_layout(const ModelConfig& m) {
  return m.layout.preset != LayoutPreset::none;
}

bool is_global_layer(const ModelConfig& m, int64_t layer) {
  const std::string& p = m.layout.pattern;
  return has_layout(m) && !p.empty() && p[static_cast<size_t>(layer) % p.size()] == 'G';
}

ModelConfig layer_model(const ModelConfig& m, bool global) {
  if (!has_layout(m)) return m;
  const LayerKindConfig& k = global ? m.layout.global : m.layout.local;
  ModelConfig out = m;
  out.layout = LayoutConfig{};
  if (k.position == LayerPosition::none) out.position.kind = PositionKind::none;
  if (k.rope_base > 0) out.position.rope.base = k.rope_base;
  if (k.qk_norm != LayerToggle::auto_) out.qk_norm = k.qk_norm == LayerToggle::on;
  if (k.temperature == LayerTemperature::llama4) out.attention_scale = AttentionScale::llama4;
  if (k.rope_scaling == LayerToggle::off) {  // the model's context stays these layers' training length
    out.position.rope.scaling = RopeScalingConfig{};
    out.position.rope.scaling.original_max_positions = m.position.rope.scaling.original_max_positions;
  }
  return out;
}

AttentionWindowSpec layer_window(const ModelConfig& m, bool global) {
  if (!has_layout(m)) return {};
  const LayerKindConfig& k = global ? m.layout.global : m.layout.local;
  if (k.window_kind != WindowKind::sliding && k.window_kind != WindowKind::chunked) return {};
  return {k.window_kind, k.window};
}

std::string describe_layout(const ModelConfig& m) {
  if (!has_layout(m)) return "";
  auto kind = [&](bool global) {
    const ModelConfig km = layer_model(m, global);
    const AttentionWindowSpec w = layer_window(m, global);
    std::ostringstream s;
    s << (global ? "global " : "local ") << position_kind_names().name(km.position.kind);
    if (position_family(km.position.kind).traits.rotary) s << " base " << km.position.rope.base;
    if (m.position.rope.scaling.kind != RopeScalingKind::none && km.position.rope.scaling.kind == RopeScalingKind::none)
      s << " unscaled";
    if (w.kind != WindowKind::none) s << ", " << window_kind_names().name(w.kind) << " " << w.size;
    if (km.attention_scale == AttentionScale::llama4 && m.attention_scale != AttentionScale::llama4) s << ", llama4";
    if (km.qk_norm) s << ", QK-norm";
    return s.str();
  };
  return layout_preset_names().name(m.layout.preset) + " (" + m.layout.pattern + ": " + kind(false) + "; " +
         kind(true) + ")";
}

}  // namespace roformer::config
