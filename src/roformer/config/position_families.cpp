// The position-family table (see position_families.h): each family's settings, traits, own
// validation, derived defaults and parameter count, one row per family.
#include "roformer/config/position_families.h"

#include <algorithm>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "roformer/config/config_errors.h"

namespace roformer::config {
namespace {

// ---- validation -------------------------------------------------------------------------

// DCA's chunk and local window: as set, or ChunkLlama's 3/4 and 1/16 of the training length.
std::pair<int64_t, int64_t> dual_chunk_sizes(const Config& c) {
  const RopeConfig& rope = c.model.position.rope;
  const int64_t trained =
      rope.scaling.original_max_positions > 0 ? rope.scaling.original_max_positions : c.data.seq_len;
  return {rope.dual_chunk.chunk_size > 0 ? rope.dual_chunk.chunk_size : trained * 3 / 4,
          rope.dual_chunk.local_window > 0 ? rope.dual_chunk.local_window : std::max<int64_t>(1, trained / 16)};
}

// ReRoPE is rope.mode=rerope with its window; a window alone is refused rather than ignored.
// Every remapping mode (rerope, string, self_extend, dual_chunk) needs plain RoPE's q.k per pair.
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
    conflict(
        o, "model.position.rope.mode", "model.position.kind",
        "rerope, string and self_extend remap RoPE's relative position, which only kind rope has whole; use kind rope");
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

void validate_rotary(const Config& c, const Origins& o) {
  const ModelConfig& m = c.model;
  const PositionConfig& p = m.position;
  const int64_t head_dim = m.head_dim();
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
  validate_rope_remap(c, o);
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

void validate_transformer_xl(const Config& c, const Origins& o) {
  if (c.model.hidden_size % 2 != 0)
    invalid(o, "model.hidden_size",
            "Transformer-XL's sinusoidal relative encodings pair sin and cos over the width, so it must be even");
}

void validate_deberta(const Config& c, const Origins& o) {
  const DebertaConfig& d = c.model.position.deberta;
  if (d.max_relative_positions > 0 && d.max_relative_positions <= d.position_buckets)
    conflict(o, "model.position.deberta.max_relative_positions", "model.position.deberta.position_buckets",
             "log buckets start at position_buckets/2 and must end beyond position_buckets; raise "
             "max_relative_positions or set it to 0 for a linear clip");
}

void validate_sandwich(const Config& c, const Origins& o) {
  const int64_t head_dim = c.model.head_dim();
  if (c.model.position.sandwich.resolved_dim(head_dim) % 2 != 0)
    invalid(o, "model.position.sandwich.dim",
            "d' (0 means the head dimension, " + std::to_string(head_dim) +
                ") must be even: the sinusoids come in d'/2 frequencies");
}

// FoX's RoPE switch brings RoPE's settings and their checks.
void validate_fox(const Config& c, const Origins& o) {
  if (c.model.position.fox.rope) validate_rotary(c, o);
}

// ---- derived defaults (every family's, whichever trains: checkpoints compare resolved values) --

void resolve_rope(Config& c) {
  RopeConfig& rope = c.model.position.rope;
  rope.rotary_dim = rope.resolved_rotary_dim(c.model.head_dim());
  if (rope.scaling.original_max_positions == 0) rope.scaling.original_max_positions = c.data.seq_len;
  std::tie(rope.dual_chunk.chunk_size, rope.dual_chunk.local_window) = dual_chunk_sizes(c);
}
void resolve_fire(Config& c) {
  if (c.model.position.fire.l_init == 0) c.model.position.fire.l_init = c.data.seq_len;
}
void resolve_sandwich(Config& c) {
  c.model.position.sandwich.dim = c.model.position.sandwich.resolved_dim(c.model.head_dim());
}
void resolve_cope(Config& c) {
  if (c.model.position.cope.max_positions == 0) c.model.position.cope.max_positions = c.data.seq_len;
}

// ---- parameters (each a double: absurd sizes give an absurd estimate, not a wrapped integer) --

double layers(const ModelConfig& m) {
  return double(m.num_layers);
}

double learned_parameters(const ModelConfig& m) {
  return double(m.position.max_positions) * double(m.embed_dim());
}
int64_t learned_rows(const ModelConfig& m) {
  return m.position.max_positions;
}
double t5_parameters(const ModelConfig& m) {
  return double(m.position.t5_bias.num_buckets) * double(m.num_heads);
}
double shaw_parameters(const ModelConfig& m) {  // w^K (and w^V), per layer or shared
  const ShawConfig& s = m.position.shaw;
  return (s.per_layer ? layers(m) : 1) * double(2 * s.max_distance + 1) * double(m.head_dim()) * (s.values ? 2 : 1);
}
double transformer_xl_parameters(const ModelConfig& m) {  // W_kr, u, v per layer
  const double H = double(m.hidden_size);
  return layers(m) * (H * H + 2 * H);
}
double deberta_parameters(const ModelConfig& m) {  // P, and W_k,r and W_q,r per layer
  const double H = double(m.hidden_size);
  return double(2 * m.position.deberta.position_buckets) * H + layers(m) * 2 * (H * H + H);
}
double fire_parameters(const ModelConfig& m) {  // c, L_multiplier, and per side 1 -> W -> heads
  const FireConfig& f = m.position.fire;
  const double W = double(f.mlp_width), heads = double(m.num_heads), sides = m.objective == Objective::mlm ? 2 : 1;
  return (f.shared_layers ? 1 : layers(m)) * (2 + sides * (2 * W + W * heads + heads));
}
double kerple_parameters(const ModelConfig& m) {
  return 2 * double(m.num_heads);
}  // r1, r2
double cope_parameters(const ModelConfig& m) {  // e per layer
  return layers(m) * double(m.head_dim()) * double(m.position.cope.max_positions);
}
double fox_parameters(const ModelConfig& m) {  // the forget gate per layer: w [heads, hidden] and b, or b alone
  const double heads = double(m.num_heads);
  return layers(m) * (m.position.fox.gate == FoxGate::data ? heads * double(m.hidden_size) + heads : heads);
}

double path_parameters(const ModelConfig& m) {  // per layer: w's projections, its convolution, beta's, the gate's
  const PathConfig& p = m.position.path;
  const double H = double(m.hidden_size), heads = double(m.num_heads), r = double(p.rank);
  return layers(m) *
         (2 * H * r + (p.short_conv ? 3 * H : 0) + H * heads + heads + (p.forget_gate ? H * heads + heads : 0));
}

const std::string kOffsetRow = "this family's bias is one row of offsets for positions 0..S-1 per pass";

std::vector<PositionFamily> make_families() {
  using K = PositionKind;
  // {explicit positions, linear attention, rotary, context extension, per layer, embeds}
  const PositionTraits rope{true, true, true, true}, features{true, true, false, false, false, true};
  const PositionTraits per_layer_terms{true, false, false, false, true};
  const PositionTraits offsets{false, false, false}, per_layer_offsets{false, false, false, false, true};
  std::vector<PositionFamily> f{
      {K::rope, "rope", {"model.position.rope."}, rope, "", "", validate_rotary, resolve_rope, nullptr},
      {K::sinusoidal, "sinusoidal", {}, features, "", "", nullptr, nullptr, nullptr},
      {K::learned,
       "learned",
       {"model.position.max_positions"},
       features,
       "",
       "",
       validate_learned,
       nullptr,
       learned_parameters,
       learned_rows},
      {K::t5_bias,
       "t5_bias",
       {"model.position.t5_bias."},
       offsets,
       kOffsetRow,
       "",
       validate_t5,
       nullptr,
       t5_parameters},
      {K::alibi, "alibi", {}, offsets, kOffsetRow, "", nullptr, nullptr, nullptr},
      {K::none,
       "none",
       {},
       {false, true, false},
       "kind none has no positions to randomise",
       "",
       nullptr,
       nullptr,
       nullptr},
      {K::shaw, "shaw", {"model.position.shaw."}, per_layer_terms, "", "", nullptr, nullptr, shaw_parameters},
      {K::transformer_xl,
       "transformer_xl",
       {},
       per_layer_terms,
       "",
       "",
       validate_transformer_xl,
       nullptr,
       transformer_xl_parameters},
      {K::deberta,
       "deberta",
       {"model.position.deberta."},
       per_layer_terms,
       "",
       "",
       validate_deberta,
       nullptr,
       deberta_parameters},
      {K::xpos,
       "xpos",
       {"model.position.rope.", "model.position.xpos."},
       {true, false, true},
       "",
       "",
       validate_rotary,
       nullptr,
       nullptr},
      {K::fire, "fire", {"model.position.fire."}, per_layer_terms, "", "", nullptr, resolve_fire, fire_parameters},
      {K::kerple, "kerple", {"model.position.kerple."}, offsets, kOffsetRow, "", nullptr, nullptr, kerple_parameters},
      {K::sandwich,
       "sandwich",
       {"model.position.sandwich."},
       offsets,
       kOffsetRow,
       "",
       validate_sandwich,
       resolve_sandwich,
       nullptr},
      {K::cope,
       "cope",
       {"model.position.cope."},
       per_layer_offsets,
       "CoPE counts its positions from the context, not from token indices",
       "CoPE counts the keys between a key and its query, which the authors define for causal attention only",
       nullptr,
       resolve_cope,
       cope_parameters},
      {K::fox,
       "fox",
       {"model.position.fox.", "model.position.rope."},
       per_layer_offsets,
       "FoX's decay comes from the tokens' forget gates, not from their positions",
       "",
       validate_fox,
       nullptr,
       fox_parameters},
      {K::path,
       "path",
       {"model.position.path."},
       per_layer_offsets,
       "PaTH's transforms come from the tokens, not from their positions",
       "PaTH accumulates its Householder products from each key up to its query, which the authors define for "
       "causal attention only",
       nullptr,
       nullptr,
       path_parameters},
  };
  for (size_t i = 0; i < f.size(); ++i)
    if (static_cast<size_t>(f[i].kind) != i)
      throw std::logic_error("position_families: rows out of PositionKind order");
  return f;
}

}  // namespace

const std::vector<PositionFamily>& position_families() {
  static const std::vector<PositionFamily> families = make_families();
  return families;
}

int64_t resolved_random_positions_max(const Config& c) {
  if (c.train.random_positions_max > 0) return c.train.random_positions_max;
  int64_t longest = 2 * c.data.seq_len;
  for (int64_t length : c.eval.lengths) longest = std::max(longest, length);
  return std::min(longest, kMaxRandomPositions);
}

const EnumNames<PositionKind>& position_kind_names() {
  static const EnumNames<PositionKind> names = [] {
    EnumNames<PositionKind> n;
    for (const PositionFamily& f : position_families()) n.entries.emplace_back(f.kind, f.name);
    return n;
  }();
  return names;
}

const PositionFamily& position_family(PositionKind kind) {
  return position_families().at(static_cast<size_t>(kind));
}

std::string family_names(bool (*keep)(const PositionTraits&)) {
  std::vector<std::string> names;
  for (const PositionFamily& f : position_families())
    if (keep(f.traits)) names.push_back(f.name);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

bool belongs_to_unused_family(const std::string& key, PositionKind kind) {
  const auto owns = [&](const PositionFamily& f) {
    return std::any_of(f.settings.begin(), f.settings.end(),
                       [&](const std::string& prefix) { return key.rfind(prefix, 0) == 0; });
  };
  const auto& all = position_families();
  const bool someones = std::any_of(all.begin(), all.end(), owns);
  return someones && !owns(position_family(kind));
}

int64_t position_length_limit(const ModelConfig& m) {
  const auto limit = position_family(m.position.kind).length_limit;
  return limit ? limit(m) : 0;
}

double position_parameters(const ModelConfig& m) {
  const auto count = position_family(m.position.kind).parameters;
  return count ? count(m) : 0.0;
}

}  // namespace roformer::config
