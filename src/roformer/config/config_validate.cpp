// Cross-field validation (constraints no single field can check) and resolution of derived
// defaults. Errors name every key involved and where each got its value. What depends on the
// position family is read from its row (position_families.h).
#include <algorithm>
#include <string>
#include <utility>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/config/config_errors.h"
#include "roformer/config/config_loader.h"
#include "roformer/config/layer_layout.h"
#include "roformer/config/position_families.h"

namespace roformer::config {
namespace {

bool takes_linear_attention(const PositionTraits& t) {
  return t.linear_attention;
}
bool takes_random_positions(const PositionTraits& t) {
  return t.explicit_positions;
}

// Randomized positions reach a family through explicit [B, S] positions (its row says when not).
void validate_random_positions(const Config& c, const Origins& o) {
  if (c.train.positions != PositionSampling::random) return;
  const PositionFamily& family = position_family(c.model.position.kind);
  if (!family.traits.explicit_positions)
    conflict(o, "train.positions", "model.position.kind",
             family.no_random_positions + "; randomized positions need a family that reads each token's position (" +
                 family_names(takes_random_positions) + "), or train.positions contiguous");
  const int64_t max = resolved_random_positions_max(c);
  if (max < c.data.seq_len)
    conflict(o, "train.random_positions_max", "data.seq_len",
             std::to_string(max) + " is below the sequence length " + std::to_string(c.data.seq_len) +
                 ": each sequence draws that many distinct positions below it");
}

void validate_task(const Config& c, const Origins& o) {
  const TaskConfig& t = c.data.task;
  if (c.train.until_learned && t.name == TaskKind::none)
    conflict(o, "train.until_learned", "data.task.name",
             "a run stops when learned by its task's exact match, and this run trains on a corpus; set data.task or "
             "train.until_learned=false");
  if (!c.eval.task_sizes.empty() && t.name == TaskKind::none)
    conflict(o, "eval.task_sizes", "data.task.name",
             "instance sizes belong to a synthetic task, and this run reads a corpus; use eval.lengths");
  const std::vector<int64_t>& e = c.eval.task_sizes;
  if (!e.empty() && (e.size() < 2 || e.size() > 3 || e[0] > e[1]))
    invalid(o, "eval.task_sizes", "give [first, last] or [first, last, step] with first <= last (e.g. [41, 500])");
  if (t.name == TaskKind::none) return;
  if (!t.sizes.empty() && (t.sizes.size() != 2 || t.sizes[0] > t.sizes[1]))
    invalid(o, "data.task.sizes", "give [first, last] with first <= last (e.g. [1, 40]), or [] to draw lengths");
  if (!t.sizes.empty() && t.min_length > 0)
    conflict(o, "data.task.sizes", "data.task.min_length",
             "both say which training lengths to draw; keep one (sizes count a task's instance sizes, min_length "
             "tokens)");
  if (t.holdout == 1)
    conflict(o, "data.task.holdout", "data.task.name",
             "1 would keep every example for evaluation and leave none to train on; use 0 (no split) or N >= 2");
  const bool has_reach = t.name == TaskKind::niah_single || t.name == TaskKind::niah_multikey ||
                         t.name == TaskKind::niah_multivalue || t.name == TaskKind::niah_multiquery ||
                         t.name == TaskKind::variable_tracking;
  if (t.reach_steps > 0 && !has_reach)
    conflict(o, "data.task.reach_steps", "data.task.name",
             "the curriculum on needle distance moves a haystack's needles, and " + task_kind_names().name(t.name) +
                 " has none; use 0 (or a niah_* task or variable_tracking)");
  if (t.min_length > c.data.seq_len)
    conflict(o, "data.task.min_length", "data.seq_len",
             std::to_string(t.min_length) + " is above the longest training length " + std::to_string(c.data.seq_len) +
                 "; lower it (0 trains at seq_len only)");
  if (t.name == TaskKind::niah_multiquery && t.queries > t.keys)
    conflict(o, "data.task.queries", "data.task.keys",
             "cannot ask for " + std::to_string(t.queries) + " of " + std::to_string(t.keys) +
                 " keys; raise keys or lower queries");
}

// Document packing changes which tokens a row holds and what each may see; what cannot follow it is named.
void validate_packing(const Config& c, const Origins& o) {
  if (c.data.packing == DataPacking::stream) return;
  const std::string packing = c.data.packing == DataPacking::documents ? "data.packing documents" : "data.packing none";
  if (c.data.task.name != TaskKind::none)
    conflict(o, "data.packing", "data.task.name",
             packing + " arranges a corpus's documents; a task generates each row itself; use data.packing=stream");
  if (c.model.kv_shift)
    conflict(o, "data.packing", "model.kv_shift",
             packing +
                 " hides other documents from each token, but the key/value shift mixes each token with the "
                 "one before it, across a document's start; use data.packing=stream or model.kv_shift=false");
  if (c.train.positions == PositionSampling::random)
    conflict(o, "data.packing", "train.positions",
             packing +
                 " gives each document its own positions from 0; randomized positions would replace them; use "
                 "train.positions=contiguous or data.packing=stream");
  if (c.model.attention == AttentionKind::linear)
    conflict(o, "data.packing", "model.attention",
             packing +
                 " hides other documents from each token, but linear attention's prefix sums run along the "
                 "whole row; use attention softmax or data.packing=stream");
}

void validate_attention(const Config& c, const Origins& o) {
  const ModelConfig& m = c.model;
  const PositionFamily& family = position_family(m.position.kind);
  const bool logn =
      m.attention_scale == AttentionScale::logn || m.attention_scale == AttentionScale::logn_past_training;
  if (logn && m.attention_scale_length == 1)
    invalid(o, "model.attention_scale_length",
            "log-n divides by log(L), which is 0 at L = 1; use the training length (0 = data.seq_len)");
  if (m.attention == AttentionKind::linear && m.attention_scale != AttentionScale::none)
    conflict(o, "model.attention", "model.attention_scale",
             "log-n scaling sharpens the softmax over a growing context; linear attention has no softmax");
  if (m.attention == AttentionKind::linear && !family.traits.linear_attention)
    conflict(o, "model.attention", "model.position.kind",
             "linear attention never forms the score matrix, so a score term (" +
                 position_kind_names().name(m.position.kind) + ") has no place in its kernelised numerator; use " +
                 family_names(takes_linear_attention));
  if (m.attention_normalizer == AttentionNormalizer::stick_breaking) {
    if (m.objective != Objective::causal_lm)
      conflict(o, "model.attention_normalizer", "model.objective",
               "stick-breaking breaks the stick from each query back over the keys before it (strictly causal, as "
               "the authors define it); use objective causal_lm, or attention_normalizer softmax for MLM");
    if (m.attention == AttentionKind::linear)
      conflict(o, "model.attention_normalizer", "model.attention",
               "stick-breaking weighs every (query, key) pair, which linear attention never forms; use attention "
               "softmax");
  }
  if (!family.causal_only.empty() && m.objective != Objective::causal_lm)
    conflict(o, "model.position.kind", "model.objective",
             family.causal_only + "; use objective causal_lm, or another family for MLM");
}

}  // namespace

void validate(const Config& c, const Origins& o) {
  try {
    check_path_component(c.name, "name");  // runs/<name> is where training writes
  } catch (const UserError& e) {
    invalid(o, "name", e.what());
  }
  const ModelConfig& m = c.model;
  if (m.explicit_head_dim == 0 && m.hidden_size % m.num_heads != 0)
    conflict(o, "model.hidden_size", "model.num_heads",
             std::to_string(m.hidden_size) + " is not divisible by " + std::to_string(m.num_heads) +
                 " heads; pick a head count that divides the width, or set model.head_dim");
  if (m.norm_weight_offset != 0.0 && m.norm_kind != NormKind::rms_norm)
    conflict(o, "model.norm_weight_offset", "model.norm_kind", "the offset scales RMSNorm; set norm_kind rms_norm");
  if (m.score_scale_dim > 0 && m.attention == AttentionKind::linear)
    conflict(o, "model.score_scale_dim", "model.attention",
             "linear attention normalises its features itself and has no score scale; set score_scale_dim 0");
  if (m.parallel_residual && m.norm != NormPlacement::pre)
    conflict(o, "model.parallel_residual", "model.norm",
             "side-by-side sublayers each normalise their input (GPT-NeoX); set model.norm pre");
  if (m.num_heads % m.kv_heads() != 0)
    conflict(o, "model.num_heads", "model.num_kv_heads",
             std::to_string(m.num_heads) + " query heads cannot share " + std::to_string(m.kv_heads()) +
                 " key/value heads evenly; pick a divisor of num_heads (or 0 for one each)");
  if (m.lm_head == LmHeadKind::linear && m.tie_output && m.embed_dim() != m.hidden_size)
    conflict(o, "model.lm_head", "model.embedding_size",
             "a linear head tied to the embeddings multiplies the hidden states (" + std::to_string(m.hidden_size) +
                 ") by embeddings of width " + std::to_string(m.embed_dim()) +
                 "; set tie_output false, lm_head transform, or embedding_size 0");
  if (const auto own = position_family(m.position.kind).validate) own(c, o);
  for (const PositionFamily& family : position_families())
    if (family.validate_settings) family.validate_settings(c, o);
  validate_attention(c, o);
  validate_layout(c, o);
  if (c.data.mask_token_frac + c.data.random_token_frac > 1.0 + 1e-12)
    conflict(o, "data.mask_token_frac", "data.random_token_frac", "their sum must be at most 1");
  if (c.train.batch_size % c.train.grad_accum != 0)
    conflict(o, "train.batch_size", "train.grad_accum",
             "the batch of " + std::to_string(c.train.batch_size) + " must split evenly into " +
                 std::to_string(c.train.grad_accum) + " micro-batches");
  if (c.dist.first_bucket_mb > c.dist.bucket_mb)
    conflict(o, "dist.first_bucket_mb", "dist.bucket_mb", "the first bucket should not be larger than the others");
  if (c.eval.lengths.empty()) invalid(o, "eval.lengths", "list at least one evaluation length, e.g. [128, 256]");
  validate_random_positions(c, o);
  validate_task(c, o);
  validate_packing(c, o);
  if (c.train.init_protocol == InitProtocol::drope && c.model.position.kind != PositionKind::none)
    conflict(o, "train.init_protocol", "model.position.kind",
             "DroPE drops the source checkpoint's position encoding, so this run has kind none (the source keeps "
             "its own); set model.position.kind=none");
  if (c.train.activation_checkpointing == ActivationCheckpointing::every_k &&
      c.train.activation_checkpointing_every > c.model.num_layers)
    conflict(o, "train.activation_checkpointing_every", "model.num_layers",
             "every " + std::to_string(c.train.activation_checkpointing_every) + "th layer of " +
                 std::to_string(c.model.num_layers) +
                 " checkpoints none; use a smaller k or activation_checkpointing=layers");
}

void resolve(Config& c) {
  // Every family's derived defaults, whichever family trains (checkpoints compare resolved values).
  for (const PositionFamily& family : position_families())
    if (family.resolve) family.resolve(c);
  if (c.model.attention_scale_length == 0) c.model.attention_scale_length = c.data.seq_len;
  c.train.random_positions_max = resolved_random_positions_max(c);
  resolve_layout(c);
}

}  // namespace roformer::config
