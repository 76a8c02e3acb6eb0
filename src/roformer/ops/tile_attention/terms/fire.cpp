// FIRE's tile term: its checks and tables (each distance's logarithm, each row's denominator and
// where its segments change, rounded as ops::fire_bias rounds them).
#include "roformer/ops/tile_attention/terms/fire.h"

#include <ATen/ATen.h>

#include <cmath>
#include <vector>

#include "roformer/ops/tile_attention/terms/fire_kernel.h"

namespace roformer::ops {
// Named, not anonymous: in a unity batch an anonymous namespace merges with its neighbours' (fire_bias.cpp
// has a psi too).
namespace fire_tile_tables {

// psi(x) = log(|c x| + 1) in T, as LibTorch rounds it.
template <typename T>
T psi(T c, T x) {
  return std::log1p(std::abs(c * x));
}

// The tables for positions 0..S-1: psi [S], denominator [S], and bounds [S, W], per query row
// the first distance d whose x = psi[d] / denominator passes each kink (S where none does). A
// row's x only falls as the row grows (its denominator grows), so each kink's bound only moves
// forward from row to row: O(S W) in all.
template <typename T>
void fill(const FireTerm& t, int64_t S, at::Tensor& table, at::Tensor& denominator, at::Tensor& bounds) {
  const T c = static_cast<T>(t.c), threshold = static_cast<T>(t.threshold), eps = static_cast<T>(t.eps);
  const at::Tensor kinks_t = t.kinks.to(table.scalar_type()).contiguous();
  const T* kinks = kinks_t.data_ptr<T>();
  const int64_t W = kinks_t.size(0);
  T* psi_d = table.data_ptr<T>();
  T* den = denominator.data_ptr<T>();
  int64_t* bound = bounds.data_ptr<int64_t>();
  for (int64_t d = 0; d < S; ++d) psi_d[d] = psi(c, static_cast<T>(d));
  for (int64_t i = 0; i < S; ++i) den[i] = psi(c, std::max(static_cast<T>(i), threshold)) + eps;
  std::vector<int64_t> at(W, 0);
  for (int64_t i = 0; i < S; ++i) {
    for (int64_t w = 0; w < W; ++w) {
      int64_t d = std::max(at[w], w > 0 ? at[w - 1] : int64_t{0});
      while (d < S && !(kinks[w] < psi_d[d] / den[i])) ++d;
      at[w] = d;
      bound[i * W + w] = d;
    }
  }
}

}  // namespace fire_tile_tables

void run_tiles(const FireTerm& term, const torch::Tensor& q, const TileAttentionLaunch& launch) {
  TORCH_CHECK(term.kinks.dim() == 1 && term.slope.dim() == 2 && term.slope.sizes() == term.intercept.sizes() &&
                  term.slope.size(0) == q.size(1) && term.slope.size(1) == term.kinks.size(0) + 1,
              "roformer::tile_attention: FIRE needs kinks [W] and slope, intercept [H, W + 1] for H = ", q.size(1),
              ", got ", term.kinks.sizes(), ", ", term.slope.sizes(), ", ", term.intercept.sizes());
  const int64_t S = launch.seq;
  at::Tensor psi_table = at::empty({S}, q.options()), denominator = at::empty({S}, q.options());
  at::Tensor bounds = at::empty({S, term.kinks.size(0)}, q.options().dtype(at::kLong));
  if (q.scalar_type() == at::kDouble) {
    fire_tile_tables::fill<double>(term, S, psi_table, denominator, bounds);
  } else {
    fire_tile_tables::fill<float>(term, S, psi_table, denominator, bounds);
  }
  const at::Tensor slope = term.slope.to(q.scalar_type()).contiguous();
  const at::Tensor intercept = term.intercept.to(q.scalar_type()).contiguous();
  FireTables tables;
  tables.psi = psi_table.data_ptr();
  tables.denominator = denominator.data_ptr();
  tables.bounds = bounds.data_ptr<int64_t>();
  tables.kinks = term.kinks.size(0);
  tables.slope = slope.data_ptr();
  tables.intercept = intercept.data_ptr();
  tile_attention_cpu(launch, fire_items(launch.dtype), &tables);
}

}  // namespace roformer::ops
