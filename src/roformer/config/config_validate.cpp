// Cross-field validation (constraints no single field can check) and resolution of derived
// defaults. Errors name every key involved and where each got its value.
#include <algorithm>
#include <string>
#include <utility>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/config/config_loader.h"

namespace roformer::config {
namespace {

std::string where(const Origins& origins, const std::string& key) {
  const auto it = origins.find(key);
  return key + (it == origins.end() ? " (default)" : " (set at " + it->second + ")");
}

[[noreturn]] void conflict(const Origins& o, const std::string& a, const std::string& b, const std::string& msg) {
  throw UserError("config: " + where(o, a) + " and " + where(o, b) + ": " + msg);
}

[[noreturn]] void invalid(const Origins& o, const std::string& a, const std::string& msg) {
  throw UserError("config: " + where(o, a) + ": " + msg);
}

// Families that reach attention only through the features (rotate) or the embeddings; score
// biases and content-position score terms (and xPos's score decay) need the score matrix.
bool works_with_linear_attention(PositionKind kind) {
  return kind == PositionKind::rope || kind == PositionKind::sinusoidal || kind == PositionKind::learned ||
         kind == PositionKind::none;
}

// train.random_positions_max after resolution: as set, or the longest evaluation length, at
// least twice the training length (so random draws reach past it).
int64_t resolved_random_positions_max(const Config& c) {
  if (c.train.random_positions_max > 0) return c.train.random_positions_max;
  int64_t longest = 2 * c.data.seq_len;
  for (int64_t length : c.eval.lengths) longest = std::max(longest, length);
  return longest;
}

// Randomized positions reach a family through explicit [B, S] positions; the offset-bias
// families form one bias row for 0..S-1 and CoPE counts positions from the context.
void validate_random_positions(const Config& c, const Origins& o) {
  if (c.train.positions != PositionSampling::random) return;
  const PositionKind kind = c.model.position.kind;
  const auto refuse = [&](const std::string& why) {
    conflict(o, "train.positions", "model.position.kind",
             why +
                 "; randomized positions need a family that reads each token's position (rope, xpos, sinusoidal, "
                 "learned, shaw, transformer_xl, deberta, fire), or train.positions contiguous");
  };
  if (kind == PositionKind::t5_bias || kind == PositionKind::alibi || kind == PositionKind::kerple ||
      kind == PositionKind::sandwich)
    refuse("this family's bias is one row of offsets for positions 0..S-1 per pass");
  if (kind == PositionKind::cope) refuse("CoPE counts its positions from the context, not from token indices");
  if (kind == PositionKind::none) refuse("kind none has no positions to randomise");
  const int64_t max = resolved_random_positions_max(c);
  if (max < c.data.seq_len)
    conflict(o, "train.random_positions_max", "data.seq_len",
             std::to_string(max) + " is below the sequence length " + std::to_string(c.data.seq_len) +
                 ": each sequence draws that many distinct positions below it");
  if (kind == PositionKind::learned && c.model.position.max_positions < max)
    conflict(o, "train.random_positions_max", "model.position.max_positions",
             "positions are drawn below " + std::to_string(max) + " but the learned table has " +
                 std::to_string(c.model.position.max_positions) + " rows; raise max_positions or lower the maximum");
}

}  // namespace

void validate(const Config& c, const Origins& o) {
  try {
    check_path_component(c.name, "name");  // runs/<name> is where training writes
  } catch (const UserError& e) {
    invalid(o, "name", e.what());
  }
  const ModelConfig& m = c.model;
  if (m.hidden_size % m.num_heads != 0)
    conflict(o, "model.hidden_size", "model.num_heads",
             std::to_string(m.hidden_size) + " is not divisible by " + std::to_string(m.num_heads) +
                 " heads; pick a head count that divides the width");
  const int64_t head_dim = m.head_dim();
  const PositionConfig& p = m.position;
  if (p.kind == PositionKind::rope || p.kind == PositionKind::xpos) {
    if (head_dim % 2 != 0)
      conflict(
          o, "model.hidden_size", "model.num_heads",
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
    if (p.rope.rerope.window > 0 && p.kind == PositionKind::xpos)
      conflict(o, "model.position.rope.rerope.window", "model.position.kind",
               "ReRoPE caps RoPE's relative position; xPos's decay is not defined for it; use kind rope");
    if (p.rope.rerope.window > 0 && p.rope.rotate_value)
      conflict(o, "model.position.rope.rerope.window", "model.position.rope.rotate_value",
               "ReRoPE's relative position exists only between a query and a key; a rotated value has none");
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
  if (m.attention == AttentionKind::linear && (p.kind == PositionKind::rope || p.kind == PositionKind::xpos) &&
      p.rope.rerope.window > 0)
    conflict(o, "model.attention", "model.position.rope.rerope.window",
             "ReRoPE picks a relative position per (query, key) pair, which linear attention never forms");
  if (m.attention_scale != AttentionScale::none && m.attention_scale_length == 1)
    invalid(o, "model.attention_scale_length",
            "log-n divides by log(L), which is 0 at L = 1; use the training length (0 = data.seq_len)");
  if (m.attention == AttentionKind::linear && m.attention_scale != AttentionScale::none)
    conflict(o, "model.attention", "model.attention_scale",
             "log-n scaling sharpens the softmax over a growing context; linear attention has no softmax");
  if (m.attention == AttentionKind::linear && !works_with_linear_attention(p.kind))
    conflict(o, "model.attention", "model.position.kind",
             "linear attention never forms the score matrix, so a score term (" + position_kind_names().name(p.kind) +
                 ") has no place in its kernelised numerator; use rope, sinusoidal, learned or none");
  if (p.kind == PositionKind::learned && c.data.seq_len > p.max_positions)
    conflict(o, "data.seq_len", "model.position.max_positions",
             "a learned position table of " + std::to_string(p.max_positions) + " rows cannot train on length " +
                 std::to_string(c.data.seq_len) + "; raise max_positions or lower seq_len");
  if (p.kind == PositionKind::t5_bias) {
    if (p.t5_bias.num_buckets % 2 != 0)
      invalid(o, "model.position.t5_bias.num_buckets",
              "must be even (bidirectional bucketing gives half the buckets to each direction)");
    // Bidirectional bucketing keeps num_buckets/4 exact distances; log buckets need room above.
    if (p.t5_bias.max_distance <= p.t5_bias.num_buckets / 2)
      conflict(o, "model.position.t5_bias.max_distance", "model.position.t5_bias.num_buckets",
               "max_distance must exceed num_buckets/2 so the logarithmic buckets are defined");
  }
  if (p.kind == PositionKind::transformer_xl && m.hidden_size % 2 != 0)
    invalid(o, "model.hidden_size",
            "Transformer-XL's sinusoidal relative encodings pair sin and cos over the width, so it must be even");
  if (p.kind == PositionKind::deberta && p.deberta.max_relative_positions > 0 &&
      p.deberta.max_relative_positions <= p.deberta.position_buckets)
    conflict(o, "model.position.deberta.max_relative_positions", "model.position.deberta.position_buckets",
             "log buckets start at position_buckets/2 and must end beyond position_buckets; raise "
             "max_relative_positions or set it to 0 for a linear clip");
  if (p.kind == PositionKind::sandwich && p.sandwich.resolved_dim(head_dim) % 2 != 0)
    invalid(o, "model.position.sandwich.dim",
            "d' (0 means the head dimension, " + std::to_string(head_dim) +
                ") must be even: the sinusoids come in d'/2 frequencies");
  if (p.kind == PositionKind::cope && m.objective != Objective::causal_lm)
    conflict(o, "model.position.kind", "model.objective",
             "CoPE counts the keys between a key and its query, which the authors define for causal attention "
             "only; use objective causal_lm, or another family for MLM");
  if (c.data.mask_token_frac + c.data.random_token_frac > 1.0 + 1e-12)
    conflict(o, "data.mask_token_frac", "data.random_token_frac", "their sum must be at most 1");
  if (c.train.batch_size % c.train.grad_accum != 0)
    conflict(o, "train.batch_size", "train.grad_accum",
             "the batch of " + std::to_string(c.train.batch_size) + " must split evenly into " +
                 std::to_string(c.train.grad_accum) + " micro-batches");
  if (c.dist.first_bucket_mb > c.dist.bucket_mb)
    conflict(o, "dist.first_bucket_mb", "dist.bucket_mb", "the first bucket should not be larger than the others");
  validate_random_positions(c, o);
}

void resolve(Config& c) {
  RopeConfig& rope = c.model.position.rope;
  rope.rotary_dim = rope.resolved_rotary_dim(c.model.head_dim());
  if (rope.scaling.original_max_positions == 0) rope.scaling.original_max_positions = c.data.seq_len;
  PositionConfig& p = c.model.position;
  if (p.fire.l_init == 0) p.fire.l_init = c.data.seq_len;
  p.sandwich.dim = p.sandwich.resolved_dim(c.model.head_dim());
  if (p.cope.max_positions == 0) p.cope.max_positions = c.data.seq_len;
  if (c.model.attention_scale_length == 0) c.model.attention_scale_length = c.data.seq_len;
  c.train.random_positions_max = resolved_random_positions_max(c);
}

}  // namespace roformer::config
