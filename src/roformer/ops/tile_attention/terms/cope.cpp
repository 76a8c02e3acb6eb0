// CoPE's tile term: its checks and its table in the launch's dtype.
#include "roformer/ops/tile_attention/terms/cope.h"

#include <ATen/ATen.h>

#include "roformer/ops/tile_attention/terms/cope_kernel.h"

namespace roformer::ops {

void run_tiles(const CopeTerm& term, const torch::Tensor& q, const TileAttentionLaunch& launch) {
  TORCH_CHECK(term.at_integers.dim() == 4 && term.at_integers.size(-1) >= 1 &&
                  term.at_integers.sizes().slice(0, 3) == q.sizes().slice(0, 3),
              "roformer::tile_attention: CoPE needs q . e [B, H, S, P] for q ", q.sizes(), ", got ",
              term.at_integers.sizes());
  const at::Tensor table = term.at_integers.to(q.scalar_type()).contiguous();
  CopeTables tables;
  tables.at_integers = table.data_ptr();
  tables.positions = table.size(-1);
  tile_attention_cpu(launch, cope_items(launch.dtype), &tables);
}

}  // namespace roformer::ops
