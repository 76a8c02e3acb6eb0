// FIRE's tile term: its checks and tables (each distance's logarithm, and per side each row's
// denominator and where its segments change, rounded as ops::fire_bias and the explicit scores
// round them).
#include "roformer/ops/tile_attention/terms/fire.h"

#include <ATen/ATen.h>

#include <cmath>
#include <type_traits>
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

// One side's tensors, alive while the kernel runs.
struct SideTensors {
  at::Tensor denominator, bounds, slope, intercept;
};

// The side's tables for positions 0..S-1: per query row its denominator psi(max(reach, threshold))
// + eps, where reach is i (past) or S - 1 - i (future), and bounds [S, W], the first distance
// d whose x = psi[d] / denominator passes each kink (S where none does). A row's x only falls as
// its reach grows, so visited by growing reach each kink's bound only moves forward: O(S W).
template <typename T>
void fill_side(const FireTerm& t, const at::Tensor& kinks_in, bool future, const T* psi_d, int64_t S,
               SideTensors& side) {
  const T c = static_cast<T>(t.c), threshold = static_cast<T>(t.threshold), eps = static_cast<T>(t.eps);
  const at::Tensor kinks_t = kinks_in.to(side.denominator.scalar_type()).contiguous();
  const T* kinks = kinks_t.data_ptr<T>();
  const int64_t W = kinks_t.size(0);
  T* den = side.denominator.data_ptr<T>();
  int64_t* bound = side.bounds.data_ptr<int64_t>();
  for (int64_t i = 0; i < S; ++i) den[i] = psi(c, std::max(static_cast<T>(future ? S - 1 - i : i), threshold)) + eps;
  std::vector<int64_t> at(W, 0);
  for (int64_t reach = 0; reach < S; ++reach) {
    const int64_t i = future ? S - 1 - reach : reach;
    for (int64_t w = 0; w < W; ++w) {
      int64_t d = std::max(at[w], w > 0 ? at[w - 1] : int64_t{0});
      while (d < S && !(kinks[w] < psi_d[d] / den[i])) ++d;
      at[w] = d;
      bound[i * W + w] = d;
    }
  }
}

void check_side(const at::Tensor& kinks, const at::Tensor& slope, const at::Tensor& intercept, int64_t H,
                const char* side) {
  TORCH_CHECK(kinks.defined() && slope.defined() && intercept.defined() && kinks.dim() == 1 && slope.dim() == 2 &&
                  slope.sizes() == intercept.sizes() && slope.size(0) == H && slope.size(1) == kinks.size(0) + 1,
              "roformer::tile_attention: FIRE's ", side,
              " side needs kinks [W] and slope, intercept [H, W + 1] for H = ", H, ", got ",
              kinks.defined() ? kinks.sizes() : at::IntArrayRef{}, ", ",
              slope.defined() ? slope.sizes() : at::IntArrayRef{}, ", ",
              intercept.defined() ? intercept.sizes() : at::IntArrayRef{});
}

// One side's tensors and its view for the kernel.
FireSide side_tables(const FireTerm& term, const at::Tensor& kinks, const at::Tensor& slope,
                     const at::Tensor& intercept, bool future, const at::Tensor& psi_table, SideTensors& keep) {
  const int64_t S = psi_table.size(0);
  keep.denominator = at::empty({S}, psi_table.options());
  keep.bounds = at::empty({S, kinks.size(0)}, psi_table.options().dtype(at::kLong));
  if (psi_table.scalar_type() == at::kDouble) {
    fill_side<double>(term, kinks, future, psi_table.data_ptr<double>(), S, keep);
  } else {
    fill_side<float>(term, kinks, future, psi_table.data_ptr<float>(), S, keep);
  }
  keep.slope = slope.to(psi_table.scalar_type()).contiguous();
  keep.intercept = intercept.to(psi_table.scalar_type()).contiguous();
  FireSide side;
  side.denominator = keep.denominator.data_ptr();
  side.bounds = keep.bounds.data_ptr<int64_t>();
  side.kinks = kinks.size(0);
  side.slope = keep.slope.data_ptr();
  side.intercept = keep.intercept.data_ptr();
  return side;
}

// psi(d) for d in [0, S).
at::Tensor psi_table(const FireTerm& term, int64_t S, const at::TensorOptions& options) {
  at::Tensor table = at::empty({S}, options);
  auto fill = [&](auto* out) {
    using T = std::remove_pointer_t<decltype(out)>;
    for (int64_t d = 0; d < S; ++d) out[d] = psi(static_cast<T>(term.c), static_cast<T>(d));
  };
  if (table.scalar_type() == at::kDouble) {
    fill(table.data_ptr<double>());
  } else {
    fill(table.data_ptr<float>());
  }
  return table;
}

}  // namespace fire_tile_tables

void run_tiles(const FireTerm& term, const torch::Tensor& q, const TileAttentionLaunch& launch) {
  using namespace fire_tile_tables;
  const int64_t H = q.size(1);
  check_side(term.kinks, term.slope, term.intercept, H, "past");
  const bool future = !launch.causal;
  if (future) check_side(term.future_kinks, term.future_slope, term.future_intercept, H, "future (bidirectional)");
  const at::Tensor psi_d = psi_table(term, launch.seq, q.options());
  FireTables tables;
  tables.psi = psi_d.data_ptr();
  SideTensors past_tensors, future_tensors;
  tables.past = side_tables(term, term.kinks, term.slope, term.intercept, false, psi_d, past_tensors);
  if (future)
    tables.future =
        side_tables(term, term.future_kinks, term.future_slope, term.future_intercept, true, psi_d, future_tensors);
  tile_attention_cpu(launch, fire_items(launch.dtype), &tables);
}

}  // namespace roformer::ops
