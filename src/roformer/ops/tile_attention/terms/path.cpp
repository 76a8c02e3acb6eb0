// PaTH's tile term: its checks and its state in the launch's dtype.
#include "roformer/ops/tile_attention/terms/path.h"

#include <ATen/ATen.h>

#include "roformer/ops/tile_attention/terms/path_kernel.h"

namespace roformer::ops {

void run_tiles(const PathTerm& term, const torch::Tensor& q, const TileAttentionLaunch& launch) {
  TORCH_CHECK(term.state.dim() == 4 && term.state.sizes().slice(0, 3) == q.sizes().slice(0, 3) &&
                  term.state.size(3) == q.size(3) + 2,
              "roformer::tile_attention: PaTH needs its state [B, H, S, D + 2] for q ", q.sizes(), ", got ",
              term.state.defined() ? term.state.sizes() : at::IntArrayRef{});
  const at::Tensor state = term.state.to(q.scalar_type()).contiguous();
  PathTables tables;
  tables.state = state.data_ptr();
  tables.forget_gate = term.forget_gate;
  tile_attention_cpu(launch, path_items(launch.dtype), &tables);
}

}  // namespace roformer::ops
