// FoX's tile term: its checks and its sums in the launch's dtype.
#include "roformer/ops/tile_attention/terms/fox.h"

#include <ATen/ATen.h>

#include "roformer/ops/tile_attention/terms/fox_kernel.h"

namespace roformer::ops {

void run_tiles(const FoxTerm& term, const torch::Tensor& q, const TileAttentionLaunch& launch) {
  TORCH_CHECK(term.cumulative.dim() == 3 && term.cumulative.sizes() == q.sizes().slice(0, 3),
              "roformer::tile_attention: FoX needs the gates' running sums [B, H, S] for q ", q.sizes(), ", got ",
              term.cumulative.sizes());
  const at::Tensor sums = term.cumulative.to(q.scalar_type()).contiguous();
  FoxTables tables;
  tables.cumulative = sums.data_ptr();
  tile_attention_cpu(launch, fox_items(launch.dtype), &tables);
}

}  // namespace roformer::ops
