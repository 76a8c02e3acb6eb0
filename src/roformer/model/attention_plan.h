// The one place attention chooses how a layer's pass runs. From what the layer is (linear or
// softmax, its normaliser, whether it forms its scores, the properties of its family's term,
// model.attention_kernel) and what the pass is (shapes, dtype, device, autograd, dropout, what
// the mask hides), plan_attention picks one path in the order written in attention_plan.cpp and
// says why; AttentionImpl runs that path and records it once. An S x S tensor is the last resort.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "roformer/config/config.h"
#include "roformer/ops/tile_attention/tile_attention.h"

namespace roformer::model {

enum class AttentionPath {
  linear,            // linear attention: feature maps and prefix sums, no scores
  short_projection,  // ops::short_attention_qkv: projection, bias, rotation and attention in one op
  short_kernel,      // ops::short_attention on q, k and v
  short_with_term,   // ops::short_attention with the family's term in its rows (tile_term's tables)
  short_with_bias,   // ops::short_attention_bias: the family's relative bias in its rows, no mask
  tiles,             // ops::tile_attention: scores, term and weights per tile (no S x S tensor)
  bias_tiles,        // ops::tile_attention_bias: CUDA tiles with the family's relative bias per score
  bias_to_sdpa,      // SDPA with the family's positions-only term added to the mask
  family_blocks,     // the family's own attention in blocks, in evaluation (PaTH's sweep)
  explicit_scores,   // the scores formed in attention, whole or per block of query rows
  sdpa,              // at::scaled_dot_product_attention with the encoder's mask or causal flag
};
const char* attention_path_name(AttentionPath path);

// Everything the plan reads, filled by AttentionImpl::pass_facts.
struct AttentionPassFacts {
  // The layer.
  bool linear = false;         // model.attention linear
  bool softmax = true;         // the softmax normaliser (else stick-breaking)
  bool forms_scores = false;   // the family forms its scores, or stick-breaking does
  bool family_blocks = false;  // it evaluates causal softmax attention in blocks of its own
  // The properties of the family's term (ops::tile_term_properties of traits().term); none where
  // the family has no tile form. Stick-breaking over a family without a term: a term of kind none.
  std::optional<ops::TileTermProperties> term;
  config::AttentionKernel kernel = config::AttentionKernel::auto_;
  // q or k change between the projection and attention other than by a fusable rotation:
  // QK-norm, log-n or SSMax on the queries, CPU autocast, or a rotation the kernel cannot apply.
  bool projection_not_fusable = false;
  // The pass.
  int64_t batch = 0, heads = 0, seq = 0, head_dim = 0;
  int64_t element_size = 4;            // bytes per score element
  bool short_shape = false;            // ops::short_attention takes [B, H, S, D] of this dtype on this device
  bool tile_shape = false;             // ops::tile_attention takes them
  bool cuda_tile_shape = false;        // ... on CUDA (ops::tile_attention_cuda_shape_supported)
  bool autograd = false;               // torch::GradMode on
  bool training = false;               // the module in training mode
  double dropout = 0;                  // attention dropout of this pass (0 in evaluation)
  bool causal = false;                 // causal attention (the mask's, or the flag without a mask)
  bool mask_beyond_causality = false;  // the mask hides keys other than by causality
  bool relative_bias_alone = false;    // ... only by the family's relative bias (ALiBi, T5, KERPLE, Sandwich)
  bool relative_bias_padded = false;   // ... by that bias and a right padding (key lengths known)
  bool relative_bias_learned = false;  // ... which takes a gradient in this pass (T5, KERPLE in training)
  bool right_padding_at_most = false;  // it hides keys by causality and a right padding at most
  bool right_padding = false;          // ... and has a right padding (key lengths)
  bool shared_positions = true;        // positions [S] shared by the batch (not explicit [B, S])
  bool documents_alone = false;        // it hides other documents' keys and at most causality beyond
};

struct AttentionPlan {
  AttentionPath path = AttentionPath::sdpa;
  const char* why = "";     // the deciding condition, for the log
  const char* detail = "";  // and why tiles do not apply, where that decided it
};

// Up to this length auto runs causal attention in ops/short_attention (past it SDPA's flash kernel
// was as fast); the relative-bias families keep it up to the op's limit; a family's term (CoPE)
// takes it up to here under fused too.
inline constexpr int64_t kShortCausalAutoSeq = 512;

// Past this many bytes of one layer's [B, H, S, S] scores, auto trains in tiles (linear memory).
inline constexpr double kTileTrainingScoreBytes = 16.0 * (1 << 20);

AttentionPlan plan_attention(const AttentionPassFacts& facts);

}  // namespace roformer::model
