// RoPE's rows of the family table and its fields: its checks (pairs, rotated width, the scalings'
// and remaps' settings), its derived defaults (the rotated width, the training length the
// scalings extend, DCA's chunks).
#include "roformer/config/families/rope.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "roformer/config/families/family_rows.h"

namespace roformer::config {
namespace {

// DCA's chunk and local window: as set, or 3/4 and 1/16 of the training length (ChunkLlama's Qwen file; its Llama file
// uses 1/8).
std::pair<int64_t, int64_t> dual_chunk_sizes(const Config& c) {
  const RopeConfig& rope = c.model.position.rope;
  const int64_t trained =
      rope.scaling.original_max_positions > 0 ? rope.scaling.original_max_positions : c.data.seq_len;
  return {rope.dual_chunk.chunk_size > 0 ? rope.dual_chunk.chunk_size : trained * 3 / 4,
          rope.dual_chunk.local_window > 0 ? rope.dual_chunk.local_window : std::max<int64_t>(1, trained / 16)};
}

// ReRoPE is rope.mode=rerope with its window; a window alone is refused rather than ignored.
// Every remapping mode (rerope, string, self_extend, dual_chunk) needs plain RoPE's q.k per pair,
// so it is refused on any other family (the row's validate_settings: checked for every model).
void validate_rope_remap(const Config& c, const Origins& o) {
  const PositionConfig& p = c.model.position;
  const RopeMode mode = p.rope.mode;
  if (mode != RopeMode::rerope && p.rope.rerope.window > 0)
    conflict(o, "model.position.rope.rerope.window", "model.position.rope.mode",
             "a ReRoPE window takes effect only with model.position.rope.mode=rerope; set that, or drop the window");
  if (mode == RopeMode::rotate) return;
  if (mode == RopeMode::rerope && p.rope.rerope.window < 1)
    invalid(o, "model.position.rope.rerope.window",
            "ReRoPE (model.position.rope.mode=rerope) needs its window w >= 1: relative positions past w count as w "
            "(Su used 512 for a model trained at 4096; at most the training length)");
  if (p.kind != PositionKind::rope)
    conflict(o, "model.position.rope.mode", "model.position.kind",
             std::string(
                 "rope.mode (rerope, string, self_extend, dual_chunk) remaps RoPE's relative position, which only ") +
                 "kind rope has whole; " + "on kind " + position_kind_names().name(p.kind) +
                 " it would change nothing; use kind rope, or leave " + "rope.mode at rotate");
  if (p.rope.rotate_value)
    conflict(o, "model.position.rope.mode", "model.position.rope.rotate_value",
             "a remapped relative position exists only between a query and a key; a rotated value has none");
  if (c.model.attention == AttentionKind::linear)
    conflict(o, "model.attention", "model.position.rope.mode",
             "rerope, string and self_extend pick a relative position per (query, key) pair, which linear attention "
             "never forms");
  if (mode != RopeMode::dual_chunk) return;
  if (c.model.objective != Objective::causal_lm)
    conflict(o, "model.position.rope.mode", "model.objective",
             "Dual Chunk Attention places each query against the chunks before it (causal, as its authors define "
             "it); use objective causal_lm, or string / self_extend for MLM");
  const auto [chunk, local] = dual_chunk_sizes(c);
  if (local >= chunk)
    conflict(o, "model.position.rope.dual_chunk.local_window", "model.position.rope.dual_chunk.chunk_size",
             "chunks hold chunk_size - local_window tokens (" + std::to_string(chunk) + " - " + std::to_string(local) +
                 " here); keep local_window below chunk_size (ChunkLlama: 1/16 and 3/4 of the training length)");
}
void resolve_rope(Config& c) {
  RopeConfig& rope = c.model.position.rope;
  rope.rotary_dim = rope.resolved_rotary_dim(c.model.head_dim());
  if (rope.scaling.original_max_positions == 0) rope.scaling.original_max_positions = c.data.seq_len;
  std::tie(rope.dual_chunk.chunk_size, rope.dual_chunk.local_window) = dual_chunk_sizes(c);
}

}  // namespace

void validate_rotary(const Config& c, const Origins& o) {
  const ModelConfig& m = c.model;
  const PositionConfig& p = m.position;
  const int64_t head_dim = m.head_dim();
  if (head_dim % 2 != 0 && m.explicit_head_dim > 0)
    invalid(o, "model.head_dim", "RoPE rotates feature pairs, so the head dimension must be even");
  if (head_dim % 2 != 0)
    conflict(o, "model.hidden_size", "model.num_heads",
             "RoPE rotates feature pairs, so the head dimension must be even (it is " + std::to_string(head_dim) + ")");
  const int64_t rd = p.rope.rotary_dim;
  if (rd % 2 != 0 || rd > head_dim)
    invalid(o, "model.position.rope.rotary_dim",
            std::to_string(rd) + " must be even and at most the head dimension " + std::to_string(head_dim) +
                " (0 means the whole head)");
  const RopeScalingConfig& s = p.rope.scaling;
  if (s.kind == RopeScalingKind::yarn && s.beta_fast <= s.beta_slow)
    conflict(o, "model.position.rope.scaling.beta_fast", "model.position.rope.scaling.beta_slow",
             "YaRN needs beta_fast > beta_slow (defaults 32 and 1)");
  if (s.kind == RopeScalingKind::llama3 && s.high_freq_factor <= s.low_freq_factor)
    conflict(o, "model.position.rope.scaling.high_freq_factor", "model.position.rope.scaling.low_freq_factor",
             "Llama 3 blends between the two wavelengths L/high and L/low, so high_freq_factor must exceed "
             "low_freq_factor (Llama 3.1: 4 and 1)");
  if (s.kind == RopeScalingKind::longrope) {
    const auto pairs = static_cast<size_t>(p.rope.resolved_rotary_dim(head_dim) / 2);
    for (const auto& [key, list] :
         {std::pair{"short_factor", &s.short_factor}, std::pair{"long_factor", &s.long_factor}})
      if (list->size() != pairs)
        invalid(o, std::string("model.position.rope.scaling.") + key,
                "LongRoPE needs one factor per rotated pair: " + std::to_string(pairs) + " (rotary_dim / 2), got " +
                    std::to_string(list->size()));
  }
}

const EnumNames<RopeScalingKind>& rope_scaling_kind_names() {
  static const EnumNames<RopeScalingKind> names{{{RopeScalingKind::none, "none"},
                                                 {RopeScalingKind::linear, "linear"},
                                                 {RopeScalingKind::ntk, "ntk"},
                                                 {RopeScalingKind::dynamic_ntk, "dynamic_ntk"},
                                                 {RopeScalingKind::yarn, "yarn"},
                                                 {RopeScalingKind::llama3, "llama3"},
                                                 {RopeScalingKind::longrope, "longrope"}}};
  return names;
}

void RopeScalingConfig::visit(FieldVisitor& v) {
  enum_field(v, "kind", kind, rope_scaling_kind_names(),
             "context extension: none, linear (position interpolation, PI: Chen et al. 2023), ntk, dynamic_ntk, yarn, "
             "llama3, longrope");
  v.field("factor", factor, at_least(1.0), "scale s = target length / training length");
  v.field("original_max_positions", original_max_positions, at_least(int64_t{0}),
          "training length L the scaling is relative to; 0 = data.seq_len");
  v.field("beta_fast", beta_fast, above(0.0), "YaRN: dims with more rotations than this keep theta");
  v.field("beta_slow", beta_slow, above(0.0), "YaRN: dims with fewer rotations are interpolated");
  v.field("attention_factor", attention_factor, between(0.0, 10.0),
          "YaRN/LongRoPE factor on cos and sin (logits scale by its square); 0 = YaRN's 0.1*ln(s)+1, "
          "LongRoPE's sqrt(1 + ln(s)/ln(L))");
  v.field("truncate", truncate, "YaRN: round the ramp's ends to whole pairs (Hugging Face's default true)");
  v.field("mscale", mscale, between(0.0, 1e3),
          "YaRN: with mscale_all_dim, default attention factor (0.1 mscale ln s + 1) / (0.1 mscale_all_dim ln s + 1); "
          "0 = unset");
  v.field("mscale_all_dim", mscale_all_dim, between(0.0, 1e3), "YaRN: see mscale; 0 = unset");
  v.field("low_freq_factor", low_freq_factor, above(0.0),
          "Llama 3: wavelengths longer than L / low_freq_factor are divided by factor (Llama 3.1: 1)");
  v.field("high_freq_factor", high_freq_factor, above(0.0),
          "Llama 3: wavelengths shorter than L / high_freq_factor are kept; between, a smooth blend (Llama 3.1: 4)");
  v.field("short_factor", short_factor, between(1e-3, 1e6),
          "LongRoPE: per-pair frequency divisors (rotary_dim/2 of them) for passes up to L");
  v.field("long_factor", long_factor, between(1e-3, 1e6),
          "LongRoPE: per-pair frequency divisors (rotary_dim/2 of them) for passes longer than L");
}

void ReRopeConfig::visit(FieldVisitor& v) {
  v.field("window", window, between(int64_t{0}, int64_t{1} << 40),
          "ReRoPE window w (rope.mode=rerope): relative positions past w count as w; 0 = none");
  v.field("leak", leak, between(0.0, 1e6),
          "Leaky ReRoPE: past w the relative position grows by 1/leak per token (Su: 16); 0 = constant (ReRoPE)");
}

void StringConfig::visit(FieldVisitor& v) {
  v.field("shift_fraction", shift_fraction, between(1e-6, 1.0),
          "S = floor(shift_fraction x the pass's length): relative positions d >= S become d - S + W (STRING: 0.33)");
  v.field("local", local, between(int64_t{0}, int64_t{1} << 40),
          "W: the position the shifted keys start from (STRING: 128); a pass with W >= S stays plain RoPE");
  v.field("attention_factor", attention_factor, between(1e-3, 1e3),
          "factor on RoPE's cos and sin, so the logits grow by its square (STRING: 0.1 ln 2 + 1)");
}

void SelfExtendConfig::visit(FieldVisitor& v) {
  v.field("group", group, between(int64_t{1}, int64_t{1} << 20), "G: positions past the window grouped by G (8)");
  v.field("window", window, between(int64_t{1}, int64_t{1} << 40),
          "W: keys closer than W to the query keep RoPE's positions (1024)");
}

void DualChunkConfig::visit(FieldVisitor& v) {
  v.field("chunk_size", chunk_size, between(int64_t{0}, int64_t{1} << 40),
          "the largest relative position DCA uses; 0 = 3/4 of the training length (ChunkLlama)");
  v.field("local_window", local_window, between(int64_t{0}, int64_t{1} << 40),
          "chunks hold chunk_size - local_window tokens; 0 = 1/16 of the training length (ChunkLlama's Qwen file; its "
          "Llama file: 1/8)");
}

void RopeConfig::visit(FieldVisitor& v) {
  static const EnumNames<RopePairing> pairings{
      {{RopePairing::interleaved, "interleaved"}, {RopePairing::half, "half"}}};
  static const EnumNames<RopeKernel> impls{{{RopeKernel::fused, "fused"}, {RopeKernel::reference, "reference"}}};
  enum_field(v, "pairing", pairing, pairings,
             "interleaved (RoFormer: pairs 2i,2i+1) or half (GPT-NeoX/LLaMA: pairs i,i+d/2)");
  v.field("base", base, above(1.0), "theta_i = base^(-2i/d)");
  v.field("rotary_dim", rotary_dim, at_least(int64_t{0}),
          "features per head that rotate (even); the rest pass through; 0 = head_dim");
  v.field("frequency_fraction", frequency_fraction, between(0.0, 1.0),
          "p-RoPE: only the highest floor(p * rotary_dim / 2) frequencies rotate, the other pairs stay unrotated "
          "(1 = RoPE, 0 = none)");
  v.field("rotate_value", rotate_value, "also rotate V (Hugging Face rotary_value)");
  enum_field(v, "impl", impl, impls,
             "fused (the custom CPU/CUDA op) or reference (plain LibTorch ops, the test oracle)");
  v.field("cos_sin_table", cos_sin_table,
          "fused op: read (cos, sin) from a table built once per (device, length) instead of computing a sincos "
          "per pair and token (same values; false computes them in the kernel)");
  v.section(
      "scaling", [this](FieldVisitor& s) { scaling.visit(s); }, "context extension");
  static const EnumNames<RopeMode> modes{{{RopeMode::rotate, "rotate"},
                                          {RopeMode::rerope, "rerope"},
                                          {RopeMode::string, "string"},
                                          {RopeMode::self_extend, "self_extend"},
                                          {RopeMode::dual_chunk, "dual_chunk"}}};
  enum_field(v, "mode", mode, modes,
             "rotate: RoPE's exact relative positions; rerope: ReRoPE / Leaky ReRoPE, relative positions capped "
             "past rerope.window; string: STRING's shifted positions; self_extend: Self-Extend's grouped positions; "
             "dual_chunk: Dual Chunk Attention's chunked positions (causal) (the last four are training-free, "
             "evaluation-time choices for RoPE checkpoints)");
  v.section(
      "rerope", [this](FieldVisitor& s) { rerope.visit(s); }, "ReRoPE / Leaky ReRoPE relative-position window");
  v.section(
      "string", [this](FieldVisitor& s) { string.visit(s); }, "STRING shifted positions (An et al. 2025)");
  v.section(
      "self_extend", [this](FieldVisitor& s) { self_extend.visit(s); },
      "Self-Extend grouped positions (Jin et al. 2024)");
  v.section(
      "dual_chunk", [this](FieldVisitor& s) { dual_chunk.visit(s); }, "Dual Chunk Attention (An et al. 2024)");
}

PositionFamily rope_family() {
  PositionFamily f{PositionKind::rope, "rope", {"model.position.rope."}, kRotaryTraits, "", "", validate_rotary,
                   resolve_rope,       nullptr};
  // The kernel and its table change the speed; the scalings and remaps are evaluation-time
  // methods any RoPE checkpoint takes.
  f.validate_settings = validate_rope_remap;
  f.runtime_settings = {"model.position.rope.impl",         "model.position.rope.cos_sin_table",
                        "model.position.rope.scaling.",     "model.position.rope.mode",
                        "model.position.rope.rerope.",      "model.position.rope.string.",
                        "model.position.rope.self_extend.", "model.position.rope.dual_chunk."};
  return f;
}

}  // namespace roformer::config
