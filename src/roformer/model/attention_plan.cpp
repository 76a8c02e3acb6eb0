// The kernel plan of one attention pass (see attention_plan.h): the order of the paths, each
// with the conditions under which it runs, written once.
#include "roformer/model/attention_plan.h"

namespace roformer::model {
namespace {

using config::AttentionKernel;

// Whether ops/short_attention may run the pass: not model.attention_kernel reference, no mask
// beyond causality, no dropout, and under auto where it measured faster than SDPA
// (docs/kernels.md): up to 128 tokens, causal up to 512, and up to the op's limit with a relative
// bias inside where SDPA would take the bias as a mask: causal, or a learned bias in training
// (whose mask gradient only SDPA's math kernel gives).
bool short_kernel_allowed(const AttentionPassFacts& f) {
  if (f.kernel == AttentionKernel::reference || f.mask_beyond_causality || f.dropout > 0.0) return false;
  if (f.kernel == AttentionKernel::fused || f.seq <= 128) return true;
  if (f.causal && f.seq <= kShortCausalAutoSeq) return true;
  return (f.causal && f.relative_bias_alone) || f.relative_bias_learned;
}

// Why the pass may not run in CUDA tiles, which evaluate only (null: it may). They run under
// model.attention_kernel fused alone: auto keeps SDPA and the explicit scores on CUDA until the
// kernel has been measured on a GPU.
const char* no_cuda_tiles(const AttentionPassFacts& f) {
  if (f.kernel != AttentionKernel::fused) return "CUDA tiles run under model.attention_kernel fused";
  if (f.autograd || f.training) return "CUDA tiles evaluate only (no backward)";
  if (!f.softmax && !(f.term && f.term->cuda_stick_breaking))
    return "CUDA tiles take stick-breaking without RoPE's remaps";
  return nullptr;
}

// Why the pass may not run in tiles (null: it may). Training takes them only without dropout
// (the recomputation would draw other masks) and, under auto, at every length for a term with a
// backward in tiles (measured faster than its explicit scores from 64 tokens on), else past
// kTileTrainingScoreBytes of one layer's scores for a term whose recomputed tiles train faster;
// the same answer with autograd on and off, so activation checkpointing's forward and its
// recomputation agree.
const char* no_tiles(const AttentionPassFacts& f) {
  if (f.kernel == AttentionKernel::reference) return "model.attention_kernel reference";
  if (!f.term) return "the family has no tile form";
  // Packed documents run in tiles one document piece at a time, each with its own positions.
  if (!f.right_padding_at_most && !f.documents_alone)
    return "the mask hides more than causality and a right padding, or packed documents";
  if (!f.causal && !(f.term->bidirectional && f.softmax)) return "the term or the normaliser is causal only";
  if (!f.shared_positions && !f.documents_alone) return "explicit positions per sequence";
  if (f.cuda_tile_shape) {
    if (const char* why = no_cuda_tiles(f)) return why;
    if (!f.term->cuda) return "the term has no CUDA tile form";
  } else if (!f.tile_shape) {
    return "shapes or dtype the tile kernel does not take";
  }
  if (f.right_padding && !f.term->key_lengths) return "the term takes no right padding";
  if (!f.autograd && !f.training) return nullptr;
  if (f.dropout > 0.0) return "attention dropout in training";
  if (f.kernel == AttentionKernel::fused) return nullptr;
  if (f.term->trains_in_tiles(f.softmax)) return nullptr;
  if (!f.term->trains_faster_in_tiles) return "the term trains faster on explicit scores";
  const double S = double(f.seq), bytes = double(f.batch) * double(f.heads) * S * S * double(f.element_size);
  return bytes > kTileTrainingScoreBytes ? nullptr : "training scores below the tile limit";
}

AttentionPlan scores_plan(const AttentionPassFacts& f) {
  // A term in the short kernel up to 512 tokens: past it CoPE measured no faster there than in tiles.
  if (f.term && f.term->short_kernel && f.softmax && short_kernel_allowed(f) && f.short_shape &&
      f.seq <= kShortCausalAutoSeq)
    return {AttentionPath::short_with_term, "the short kernel computes the term"};
  const char* why_not_tiles = no_tiles(f);
  if (why_not_tiles == nullptr) return {AttentionPath::tiles, "scores, term and weights per tile"};
  // Evaluation only: activation checkpointing's forward runs without autograd in training and
  // must round as its recomputation with autograd does.
  if (f.term && f.term->positions_only && f.softmax && !f.autograd && !f.training)
    return {AttentionPath::bias_to_sdpa, "a positions-only term, no tiles: ", why_not_tiles};
  // Outside the reference kernel and training (activation checkpointing's forward and its
  // recomputation must agree), with nothing beyond causality in the mask.
  if (f.family_blocks && f.causal && f.softmax && !f.mask_beyond_causality && !f.autograd && !f.training &&
      f.kernel != AttentionKernel::reference)
    return {AttentionPath::family_blocks, "the family's own blocks in evaluation, no tiles: ", why_not_tiles};
  return {AttentionPath::explicit_scores, "no tiles: ", why_not_tiles};
}

}  // namespace

const char* attention_path_name(AttentionPath path) {
  switch (path) {
    case AttentionPath::linear:
      return "linear";
    case AttentionPath::short_projection:
      return "short-projection";
    case AttentionPath::short_kernel:
      return "short";
    case AttentionPath::short_with_term:
      return "short-with-term";
    case AttentionPath::short_with_bias:
      return "short-with-bias";
    case AttentionPath::tiles:
      return "tiles";
    case AttentionPath::bias_tiles:
      return "bias-tiles";
    case AttentionPath::bias_to_sdpa:
      return "bias-to-sdpa";
    case AttentionPath::family_blocks:
      return "family-blocks";
    case AttentionPath::explicit_scores:
      return "explicit-scores";
    case AttentionPath::sdpa:
      return "sdpa";
  }
  return "?";
}

AttentionPlan plan_attention(const AttentionPassFacts& f) {
  if (f.linear) return {AttentionPath::linear, "model.attention linear"};
  if (f.forms_scores) return scores_plan(f);
  // A mask that is the family's relative bias (and causality) alone: the short kernels add the
  // bias rows themselves (the projection form passes them too).
  AttentionPassFacts kernel_facts = f;
  if (f.relative_bias_alone) kernel_facts.mask_beyond_causality = false;
  const bool short_kernel = short_kernel_allowed(kernel_facts) && f.short_shape;
  if (short_kernel && !f.projection_not_fusable)
    return {AttentionPath::short_projection,
            f.relative_bias_alone ? "short sequence, the relative bias inside" : "short sequence, rotation fusable"};
  if (short_kernel && f.relative_bias_alone)
    return {AttentionPath::short_with_bias, "short sequence, the relative bias inside the kernel"};
  if (short_kernel) return {AttentionPath::short_kernel, "short sequence"};
  if ((f.relative_bias_alone || f.relative_bias_padded) && f.cuda_tile_shape && !no_cuda_tiles(f))
    return {AttentionPath::bias_tiles, "the relative bias per score in CUDA tiles"};
  return {AttentionPath::sdpa, "no fused path applies"};
}

}  // namespace roformer::model
