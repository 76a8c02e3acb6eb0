// FIRE's tile term: its checks and tables (each distance's logarithm, and per side each row's
// denominator and where its segments change, rounded as ops::fire_bias and the explicit scores
// round them).
#include "roformer/ops/tile_attention/terms/fire.h"

#include <ATen/ATen.h>

#include <cmath>
#include <type_traits>
#include <vector>

#include "roformer/ops/tile_attention/terms/fire_kernel.h"
#include "roformer/ops/tile_attention/terms/grad_sums.h"

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

// The term's tables for the launch (checked), their tensors in `keep`.
struct Prepared {
  FireTables tables;
  at::Tensor psi;
  SideTensors past, future;
};
void prepare(const FireTerm& term, const at::Tensor& q, const TileAttentionLaunch& launch, Prepared& p) {
  const int64_t H = q.size(1);
  check_side(term.kinks, term.slope, term.intercept, H, "past");
  const bool future = !launch.causal;
  if (future) check_side(term.future_kinks, term.future_slope, term.future_intercept, H, "future (bidirectional)");
  p.psi = psi_table(term, launch.seq, q.options());
  p.tables.psi = p.psi.data_ptr();
  p.tables.past = side_tables(term, term.kinks, term.slope, term.intercept, false, p.psi, p.past);
  if (future)
    p.tables.future =
        side_tables(term, term.future_kinks, term.future_slope, term.future_intercept, true, p.psi, p.future);
}

// The backward's derivatives by c of psi(d) = log(|c d| + 1), for d in [0, S), and per side of
// each row's denominator psi(max(reach, L)) + eps by c and by L (reach i, or S - 1 - i for the
// future side; a tie of reach and L splits the gradient in halves, as torch::maximum's does); in
// `dtype`.
struct Derivatives {
  at::Tensor psi_by_c, past_by_c, past_by_threshold, future_by_c, future_by_threshold;
};
Derivatives derivatives(const FireTerm& term, int64_t S, at::ScalarType dtype) {
  const double c = term.c, L = term.threshold, sign = c > 0 ? 1.0 : c < 0 ? -1.0 : 0.0;
  const at::Tensor d = at::arange(S, at::TensorOptions().dtype(at::kDouble));
  auto by_c = [&](const at::Tensor& x) { return sign * x / (1 + std::abs(c) * x); };  // x >= 0
  auto side = [&](bool future, at::Tensor& den_by_c, at::Tensor& den_by_threshold) {
    const at::Tensor reach = future ? (S - 1) - d : d;
    const at::Tensor m = at::clamp_min(reach, L);
    den_by_c = by_c(m).to(dtype);
    const at::Tensor weight = (reach < L).to(at::kDouble) + 0.5 * (reach == L).to(at::kDouble);
    den_by_threshold = (weight * std::abs(c) / (1 + std::abs(c) * m) * (m > 0)).to(dtype);
  };
  Derivatives out;
  out.psi_by_c = by_c(d).to(dtype);
  side(false, out.past_by_c, out.past_by_threshold);
  side(true, out.future_by_c, out.future_by_threshold);
  return out;
}

}  // namespace fire_tile_tables

void run_tiles(const FireTerm& term, const torch::Tensor& q, const TileAttentionLaunch& launch) {
  fire_tile_tables::Prepared p;
  fire_tile_tables::prepare(term, q, launch, p);
  tile_attention_cpu(launch, fire_items(launch.dtype), &p.tables);
}

std::vector<torch::Tensor> grad_tensors(const FireTerm& term) {
  return {term.slope, term.intercept, term.future_slope, term.future_intercept, term.c_tensor, term.threshold_tensor};
}

std::vector<torch::Tensor> run_tile_grads(const FireTerm& term, const torch::Tensor& q,
                                          const TileAttentionLaunch& launch, const TileAttentionGrad& grad) {
  using namespace fire_tile_tables;
  Prepared p;
  prepare(term, q, launch, p);
  const int64_t B = launch.batch, H = launch.heads;
  const Derivatives der = derivatives(term, launch.seq, q.scalar_type());
  p.tables.psi_by_c = der.psi_by_c.data_ptr();
  const auto doubles = at::TensorOptions().dtype(at::kDouble);
  struct SideGrads {
    at::Tensor slope, intercept, c, threshold;
  };
  auto side_grads = [&](FireSide& side, const at::Tensor& by_c, const at::Tensor& by_threshold, int64_t kinks) {
    SideGrads g{at::zeros({B, H, kinks + 1}, doubles), at::zeros({B, H, kinks + 1}, doubles),
                at::zeros({B, H}, doubles), at::zeros({B, H}, doubles)};
    side.denominator_by_c = by_c.data_ptr();
    side.denominator_by_threshold = by_threshold.data_ptr();
    side.grad_slope = g.slope.data_ptr<double>();
    side.grad_intercept = g.intercept.data_ptr<double>();
    side.grad_c = g.c.data_ptr<double>();
    side.grad_threshold = g.threshold.data_ptr<double>();
    return g;
  };
  const bool future = !launch.causal;
  const SideGrads past = side_grads(p.tables.past, der.past_by_c, der.past_by_threshold, term.kinks.size(0));
  const SideGrads ahead =
      future ? side_grads(p.tables.future, der.future_by_c, der.future_by_threshold, term.future_kinks.size(0))
             : SideGrads{};
  tile_attention_grad_cpu(launch, grad, fire_grad_pairs(launch.dtype), &p.tables);
  // FIRE's bias is added to the scaled scores as it is: no scale on its gradients.
  auto like = [](const at::Tensor& sum, const at::Tensor& t) { return sum.to(t.scalar_type()).reshape(t.sizes()); };
  std::vector<at::Tensor> grads(6);
  grads[0] = like(sum_over_batch(past.slope), term.slope);
  grads[1] = like(sum_over_batch(past.intercept), term.intercept);
  at::Tensor c_sum = past.c, threshold_sum = past.threshold;
  if (future) {
    grads[2] = like(sum_over_batch(ahead.slope), term.future_slope);
    grads[3] = like(sum_over_batch(ahead.intercept), term.future_intercept);
    c_sum = c_sum + ahead.c;
    threshold_sum = threshold_sum + ahead.threshold;
  }
  if (term.c_tensor.defined()) grads[4] = like(sum_over_batch(c_sum).sum(), term.c_tensor);
  if (term.threshold_tensor.defined()) grads[5] = like(sum_over_batch(threshold_sum).sum(), term.threshold_tensor);
  return grads;
}

}  // namespace roformer::ops
