// What a caller may ask of a tile term without forming it: each term type says its properties
// (Term::properties()), so attention's plan chooses a kernel path without naming a family.
#pragma once

namespace roformer::ops {

struct TileTermProperties {
  bool key_lengths = true;             // takes right padding as key lengths (a walk that passes every position: no)
  bool short_kernel = false;           // ops::short_attention computes it in its rows too
  bool positions_only = false;         // reads neither the scores nor q and k: SDPA may take it as an additive mask
  bool trains_faster_in_tiles = true;  // its tiles, recomputed in backward, beat its explicit scores in training
  bool forms_scores = false;           // forms the tile's scores itself (no replaced queries or second rotations)
  bool bidirectional = true;           // takes keys after the query too (attention without the causal mask)
  bool tile_backward = false;          // has a backward in tiles (tile_attention_trainable, or a family's blocks)
  bool backward_softmax_only = false;  // that backward takes softmax alone (PaTH's blocks, CoPE), not stick-breaking
  bool cuda = false;                   // the CUDA kernel computes it (tile_attention_cuda_launch.h; evaluation)
  bool cuda_stick_breaking = false;    // ... under stick-breaking too (no rotations of the family's own)

  // Whether its backward in tiles takes this normaliser (softmax, else stick-breaking).
  constexpr bool trains_in_tiles(bool softmax) const { return tile_backward && (softmax || !backward_softmax_only); }
};

}  // namespace roformer::ops
