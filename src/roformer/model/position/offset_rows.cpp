// Toeplitz score rows from a [H, 2S - 1] table of offsets (see offset_rows.h).
#include "roformer/model/position/offset_rows.h"

#include <torch/torch.h>

namespace roformer::model {

torch::Tensor toeplitz_rows(const torch::Tensor& table, int64_t begin, int64_t end, int64_t keys) {
  TORCH_CHECK(table.dim() == 2 && table.size(1) % 2 == 1, "toeplitz_rows: table must be [H, 2S - 1], got ",
              table.sizes());
  const int64_t S = (table.size(1) + 1) / 2, C = end - begin;
  TORCH_CHECK(0 <= begin && begin < end && end <= S, "toeplitz_rows: rows [", begin, ", ", end, ") outside [0, ", S,
              ")");
  if (keys < 0) keys = S;
  TORCH_CHECK(keys >= 1 && keys <= S, "toeplitz_rows: ", keys, " keys outside [1, ", S, "]");
  // Gathered by offset rather than as a flipped unfold of the table: flip lays its output out
  // column-major for C < S, and SDPA wants the keys contiguous. The index is one [C, S] row
  // broadcast over the heads (its backward takes PyTorch's deterministic route when asked).
  const auto opts = torch::dtype(torch::kLong).device(table.device());
  const torch::Tensor offset =
      torch::arange(keys, opts).unsqueeze(0) - torch::arange(begin, end, opts).unsqueeze(1) + (S - 1);  // [C, keys]
  return table.gather(1, offset.view({1, C * keys}).expand({table.size(0), C * keys})).view({table.size(0), C, keys});
}

}  // namespace roformer::model
