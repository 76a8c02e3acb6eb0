// PaTH's row and fields: its parameter count.
#include "roformer/config/families/path.h"

#include <string>

#include "roformer/config/families/family_rows.h"

namespace roformer::config {
namespace {

double path_parameters(const ModelConfig& m) {  // per layer: w's projections, its convolution, beta's, the gate's
  const PathConfig& p = m.position.path;
  const double H = double(m.hidden_size), heads = double(m.num_heads), r = double(p.rank);
  return layers(m) *
         (2 * H * r + (p.short_conv ? 3 * H : 0) + H * heads + heads + (p.forget_gate ? H * heads + heads : 0));
}

void validate_path(const Config& c, const Origins& o) {
  require_heads_fill_the_width(c, o, "PaTH");
}

}  // namespace

void PathConfig::visit(FieldVisitor& v) {
  v.field("forget_gate", forget_gate, "also add FoX's forget-gate decay c_i - c_j (PaTH-FoX)");
  v.field("rank", rank, between(int64_t{1}, int64_t{1} << 20),
          "width of the low-rank projection that makes w (the authors: 32)");
  v.field("short_conv", short_conv,
          "w through a causal depthwise convolution of width 3 and SiLU (the authors' default)");
  v.field("block", block, between(int64_t{1}, int64_t{4096}),
          "tokens per block of the blockwise Householder products: speed only, every value gives the same scores "
          "(32: the fastest at 1024 and 4096 tokens on the CPU, docs/performance.md; CPU training takes its blocks "
          "kernel for multiples of 8)");
}

PositionFamily path_family() {
  return {PositionKind::path,
          "path",
          {"model.position.path."},
          kPerLayerOffsetTraits,
          "PaTH's transforms come from the tokens, not from their positions",
          "PaTH accumulates its Householder products from each key up to its query, which the authors define for "
          "causal attention only",
          validate_path,
          nullptr,
          path_parameters,
          nullptr,
          {"model.position.path.block"}};  // the block size changes the speed, not the scores
}

}  // namespace roformer::config
