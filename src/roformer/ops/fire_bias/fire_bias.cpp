// Fused FIRE bias: argument checks, the per-block tables (each distance's logarithm, each row's
// denominator, in the output's dtype as the unfused formula rounds them) and the launch.
#include "roformer/ops/fire_bias/fire_bias.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "roformer/ops/common/kernel_dtype_torch.h"
#include "roformer/ops/fire_bias/fire_bias_kernels.h"

namespace roformer::ops {
namespace {

constexpr int64_t kMaxDistances = int64_t{1} << 26;  // the table's entries (256 MiB of float32)

// psi(x) = log(|c x| + 1), rounded as LibTorch rounds it in T.
template <typename T>
T psi(T c, T x) {
  return std::log1p(std::abs(c * x));
}

template <typename T>
void fill_tables(const FireBiasArgs& a, const FireBiasLaunch& p, at::Tensor& table, at::Tensor& denominator) {
  const T c = static_cast<T>(a.c), threshold = static_cast<T>(a.threshold), eps = static_cast<T>(a.eps);
  T* t = table.data_ptr<T>();
  for (int64_t i = 0; i < p.distances; ++i) t[i] = psi(c, static_cast<T>(p.distance_min + i));
  T* d = denominator.data_ptr<T>();
  for (int64_t r = 0; r < p.rows; ++r) d[r] = psi(c, std::max(static_cast<T>(p.query_positions[r]), threshold)) + eps;
}

}  // namespace

torch::Tensor fire_bias(const FireBiasArgs& a) {
  TORCH_CHECK(a.positions.dim() == 1 && a.positions.scalar_type() == at::kLong && a.positions.is_cpu(),
              "roformer::fire_bias: positions must be a 1-D int64 CPU tensor, got ", a.positions.sizes());
  const int64_t S = a.positions.size(0);
  TORCH_CHECK(0 <= a.begin && a.begin <= a.end && a.end <= S && 0 <= a.keys && a.keys <= S,
              "roformer::fire_bias: rows [", a.begin, ", ", a.end, ") and keys [0, ", a.keys, ") must lie in ", S);
  TORCH_CHECK(a.kinks.dim() == 1 && a.slope.dim() == 2 && a.slope.sizes() == a.intercept.sizes() &&
                  a.slope.size(1) == a.kinks.size(0) + 1,
              "roformer::fire_bias: kinks [W] and slope, intercept [H, W + 1] expected, got ", a.kinks.sizes(), ", ",
              a.slope.sizes(), ", ", a.intercept.sizes());
  const auto dt = a.slope.scalar_type();
  TORCH_CHECK(dt == at::kFloat || dt == at::kDouble, "roformer::fire_bias: float32 or float64 slopes, got ", dt);
  const at::Tensor positions = a.positions.contiguous();
  const at::Tensor kinks = a.kinks.to(dt).contiguous(), slope = a.slope.contiguous(),
                   intercept = a.intercept.to(dt).contiguous();
  const int64_t H = slope.size(0), C = a.end - a.begin;
  at::Tensor out = at::empty({H, C, a.keys}, slope.options());
  if (C == 0 || a.keys == 0) return out;
  FireBiasLaunch p;
  p.rows = C;
  p.keys = a.keys;
  p.heads = H;
  p.kinks = kinks.size(0);
  p.dtype = to_kernel_dtype(dt, "roformer::fire_bias");
  p.query_positions = positions.data_ptr<int64_t>() + a.begin;
  p.key_positions = positions.data_ptr<int64_t>();
  const auto [qmin, qmax] = std::minmax_element(p.query_positions, p.query_positions + C);
  const auto [kmin, kmax] = std::minmax_element(p.key_positions, p.key_positions + a.keys);
  p.distance_min = *qmin - *kmax;
  p.distances = *qmax - *kmin - p.distance_min + 1;
  TORCH_CHECK(p.distances <= kMaxDistances, "roformer::fire_bias: positions span ", p.distances,
              " distances, more than the table holds (", kMaxDistances, ")");
  at::Tensor table = at::empty({p.distances}, slope.options()), denominator = at::empty({C}, slope.options());
  if (dt == at::kDouble) {
    fill_tables<double>(a, p, table, denominator);
  } else {
    fill_tables<float>(a, p, table, denominator);
  }
  p.psi = table.data_ptr();
  p.denominator = denominator.data_ptr();
  p.kink = kinks.data_ptr();
  p.slope = slope.data_ptr();
  p.intercept = intercept.data_ptr();
  p.out = out.data_ptr();
  fire_bias_cpu(p);
  return out;
}

}  // namespace roformer::ops
