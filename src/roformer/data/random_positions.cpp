// Randomized positions: Floyd's algorithm on the counter RNG, then a sort (see the header).
#include "roformer/data/random_positions.h"

#include <algorithm>
#include <unordered_set>

#include "roformer/data/counter_rng.h"

namespace roformer::data {
namespace {

constexpr uint64_t kPositionStream = 0x72706f73ULL;  // "rpos": independent of the data and mask draws

}  // namespace

std::vector<int64_t> draw_sorted_positions(int64_t S, int64_t max, uint64_t seed, int64_t step, int64_t row) {
  TORCH_CHECK(0 <= S && S <= max, "draw_sorted_positions: need 0 <= S <= max, got S = ", S, ", max = ", max);
  // Floyd: for j = max - S .. max - 1 take t uniform in [0, j]; keep t, or j if t is taken.
  std::unordered_set<int64_t> taken;
  taken.reserve(static_cast<size_t>(2 * S));
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(S));
  for (int64_t j = max - S; j < max; ++j) {
    const uint64_t h = hash_counters(
        seed, {kPositionStream, static_cast<uint64_t>(step), static_cast<uint64_t>(row), static_cast<uint64_t>(j)});
    const int64_t t = static_cast<int64_t>(h % static_cast<uint64_t>(j + 1));
    const int64_t pick = taken.count(t) ? j : t;
    taken.insert(pick);
    out.push_back(pick);
  }
  std::sort(out.begin(), out.end());
  return out;
}

torch::Tensor random_positions(const std::vector<int64_t>& rows, int64_t S, int64_t max, uint64_t seed, int64_t step) {
  torch::Tensor out = torch::empty({static_cast<int64_t>(rows.size()), S}, torch::kLong);
  int64_t* p = out.data_ptr<int64_t>();
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::vector<int64_t> drawn = draw_sorted_positions(S, max, seed, step, rows[i]);
    std::copy(drawn.begin(), drawn.end(), p + static_cast<int64_t>(i) * S);
  }
  return out;
}

}  // namespace roformer::data
