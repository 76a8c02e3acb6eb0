// Randomized positional encodings (Ruoss et al., ACL 2023): each training sequence of S tokens
// gets S sorted distinct positions drawn uniformly from [0, max) instead of 0..S-1, so a model
// trained at S has seen every position up to max. The draws are a pure function of (seed, step,
// the row's index in the global batch), like the rest of a batch: a resumed run draws the same.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace roformer::data {

// S sorted distinct values from [0, max) (S <= max) for the row keyed by (seed, step, row):
// Floyd's sampling, every S-subset equally likely.
std::vector<int64_t> draw_sorted_positions(int64_t S, int64_t max, uint64_t seed, int64_t step, int64_t row);

// [rows.size(), S] int64: draw_sorted_positions for each global row index in `rows`.
torch::Tensor random_positions(const std::vector<int64_t>& rows, int64_t S, int64_t max, uint64_t seed, int64_t step);

}  // namespace roformer::data
