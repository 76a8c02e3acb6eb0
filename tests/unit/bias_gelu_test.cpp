// The fused bias + GELU op (CPU kernel, and the formulas the CUDA kernel shares) against GELU
// transcribed from Hendrycks & Gimpel in double: x Phi(x) with Phi from erf, the tanh
// approximation, and their derivatives; forward and backward on a dense grid, with odd shapes,
// half types, non-finite inputs, any thread count; and the model with the fused kernel against
// the model with LibTorch's addmm + GELU.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "model_compare.h"
#include "roformer/model/encoder.h"
#include "roformer/ops/feed_forward/bias_gelu.h"
#include "roformer/ops/feed_forward/bias_gelu_math.h"

namespace bias_gelu_test {

using namespace roformer;

namespace {

// GELU and its derivative in double, straight from the definitions.
double gelu_ref(double x, bool tanh_form) {
  if (tanh_form) return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}
double gelu_grad_ref(double x, bool tanh_form) {
  if (tanh_form) {
    const double u = std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x), th = std::tanh(u);
    return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * std::sqrt(2 / M_PI) * (1 + 3 * 0.044715 * x * x);
  }
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}

// Fused forward and backward (upstream gradient of ones) of x + bias.
struct Fused {
  torch::Tensor y, grad_x, grad_bias;
};
Fused run_fused(const torch::Tensor& x0, const torch::Tensor& bias0, bool tanh_form,
                const torch::Tensor& upstream = {}) {
  torch::Tensor x = x0.clone().requires_grad_(true), bias = bias0.clone().requires_grad_(true);
  torch::Tensor y = ops::bias_gelu(x, bias, tanh_form);
  y.backward(upstream.defined() ? upstream : torch::ones_like(y));
  return {y.detach(), x.grad(), bias.grad()};
}

}  // namespace

TEST(BiasGelu, FloatKernelFollowsTheDoubleFormulaOnADenseGrid) {
  // -12..12 in steps of 1/1024 (x + bias, bias 0.25), both forms; error budget 3e-7 max(1, |x|).
  const torch::Tensor x = torch::arange(-12.25, 11.75, 1.0 / 1024, torch::kFloat64).to(torch::kFloat32).view({-1, 8});
  const torch::Tensor bias = torch::full({8}, 0.25, torch::kFloat32);
  for (bool tanh_form : {false, true}) {
    const Fused f = run_fused(x, bias, tanh_form);
    const torch::Tensor v = (x.to(torch::kFloat64) + 0.25).flatten();
    const torch::Tensor y = f.y.to(torch::kFloat64).flatten(), dy = f.grad_x.to(torch::kFloat64).flatten();
    const auto va = v.accessor<double, 1>(), ya = y.accessor<double, 1>(), dya = dy.accessor<double, 1>();
    double worst_y = 0, worst_dy = 0;
    for (int64_t i = 0; i < v.numel(); ++i) {
      const double xi = va[i], scale = std::max(1.0, std::abs(xi));
      worst_y = std::max(worst_y, std::abs(ya[i] - gelu_ref(xi, tanh_form)) / scale);
      worst_dy = std::max(worst_dy, std::abs(dya[i] - gelu_grad_ref(xi, tanh_form)) / scale);
    }
    EXPECT_LT(worst_y, 3e-7) << (tanh_form ? "tanh" : "erf");
    EXPECT_LT(worst_dy, 3e-7) << (tanh_form ? "tanh" : "erf");
  }
}

TEST(BiasGelu, ExpApproximationIsWithinTwoUlpOfTheLibrary) {
  for (double a = -87; a <= 0; a += 1.0 / 4096) {
    const float got = ops::exp_nonpositive(static_cast<float>(a)), want = std::exp(static_cast<float>(a));
    ASSERT_LE(std::abs(got - want), 2.5e-7f * want) << "a = " << a;
  }
  EXPECT_TRUE(std::isnan(ops::exp_nonpositive(std::nanf(""))));
  EXPECT_LT(ops::exp_nonpositive(-INFINITY), 1e-37f);
}

TEST(BiasGelu, DoubleKernelEqualsTheFormula) {
  const torch::Tensor x = torch::randn({7, 33}, torch::kFloat64) * 3;
  const torch::Tensor bias = torch::randn({33}, torch::kFloat64);
  for (bool tanh_form : {false, true}) {
    const Fused f = run_fused(x, bias, tanh_form);
    const torch::Tensor v = x + bias;
    for (int64_t i = 0; i < v.numel(); ++i) {
      const double xi = v.flatten()[i].item<double>();
      EXPECT_NEAR(f.y.flatten()[i].item<double>(), gelu_ref(xi, tanh_form), 1e-14 * std::max(1.0, std::abs(xi)));
      EXPECT_NEAR(f.grad_x.flatten()[i].item<double>(), gelu_grad_ref(xi, tanh_form),
                  1e-14 * std::max(1.0, std::abs(xi)));
    }
  }
}

TEST(BiasGelu, GradientsMatchAutogradOfTheUnfusedOpsInDouble) {
  // Odd sizes: 3 x 45 rows (not a multiple of the 32-row backward blocks), 37 columns.
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({3, 45, 37}) * 2, bias = torch::randn({37}), up = torch::randn({3, 45, 37});
  for (bool tanh_form : {false, true}) {
    torch::Tensor xr = x.to(torch::kFloat64).requires_grad_(true), br = bias.to(torch::kFloat64).requires_grad_(true);
    const torch::Tensor yr = torch::gelu(xr + br, tanh_form ? "tanh" : "none");
    yr.backward(up.to(torch::kFloat64));
    const Fused f = run_fused(x, bias, tanh_form, up);
    EXPECT_TRUE(torch::allclose(f.y.to(torch::kFloat64), yr.detach(), 1e-6, 1e-6));
    // Budget: |upstream| (<~4) x 3e-7 max(1, |x + bias|) (<~10) plus float rounding.
    EXPECT_TRUE(torch::allclose(f.grad_x.to(torch::kFloat64), xr.grad(), 1e-5, 1e-5))
        << (f.grad_x.to(torch::kFloat64) - xr.grad()).abs().max();
    EXPECT_TRUE(torch::allclose(f.grad_bias.to(torch::kFloat64), br.grad(), 1e-5, 1e-5))
        << (f.grad_bias.to(torch::kFloat64) - br.grad()).abs().max();
    EXPECT_EQ(f.y.sizes(), x.sizes());
    EXPECT_EQ(f.grad_x.sizes(), x.sizes());
  }
}

TEST(BiasGelu, HalfTypesFollowTheFloatKernel) {
  torch::manual_seed(4);
  const torch::Tensor x = torch::randn({19, 24}) * 3, bias = torch::randn({24});
  const Fused ref = run_fused(x, bias, false);
  for (auto dtype : {torch::kBFloat16, torch::kFloat16}) {
    // x in the half type, bias kept in float32 (autocast's case); computed in float, rounded once.
    const torch::Tensor xh = x.to(dtype);
    const Fused h = run_fused(xh, bias, false);
    ASSERT_EQ(h.y.scalar_type(), dtype);
    ASSERT_EQ(h.grad_bias.scalar_type(), torch::kFloat32);
    const Fused from_rounded = run_fused(xh.to(torch::kFloat32), bias, false);
    EXPECT_TRUE(torch::equal(h.y, from_rounded.y.to(dtype)));
    EXPECT_TRUE(torch::equal(h.grad_x, from_rounded.grad_x.to(dtype)));
    const double tol = dtype == torch::kBFloat16 ? 0.05 : 0.01;
    EXPECT_TRUE(torch::allclose(h.y.to(torch::kFloat32), ref.y, tol, tol));
  }
}

TEST(BiasGelu, NonFiniteInputsGiveNonFiniteOutputs) {
  const torch::Tensor x = torch::tensor(std::vector<float>{NAN, INFINITY, -INFINITY, 1.0f}).view({1, 4});
  for (bool tanh_form : {false, true}) {
    const Fused f = run_fused(x, torch::zeros({4}), tanh_form);
    EXPECT_TRUE(std::isnan(f.y[0][0].item<float>()));
    EXPECT_TRUE(std::isnan(f.grad_x[0][0].item<float>()));
    EXPECT_FALSE(std::isfinite(f.y[0][1].item<float>()));
    EXPECT_FALSE(std::isfinite(f.grad_bias[0].item<float>()));
    EXPECT_TRUE(std::isfinite(f.y[0][3].item<float>()));
  }
}

TEST(BiasGelu, ResultsDoNotDependOnTheThreadCount) {
  torch::manual_seed(5);
  const torch::Tensor x = torch::randn({1000, 96}), bias = torch::randn({96});
  const int before = at::get_num_threads();
  at::set_num_threads(1);
  const Fused one = run_fused(x, bias, false);
  at::set_num_threads(2);
  const Fused two = run_fused(x, bias, false);
  at::set_num_threads(before);
  EXPECT_TRUE(torch::equal(one.y, two.y));
  EXPECT_TRUE(torch::equal(one.grad_x, two.grad_x));
  EXPECT_TRUE(torch::equal(one.grad_bias, two.grad_bias));
}

TEST(BiasGelu, RejectsABiasOfAnotherWidth) {
  EXPECT_THROW(ops::bias_gelu(torch::zeros({2, 5}), torch::zeros({4}), false), c10::Error);
  EXPECT_THROW(ops::bias_gelu(torch::zeros({2, 5}, torch::kLong), torch::zeros({5}), false), c10::Error);
}

TEST(BiasGelu, ModelWithTheFusedKernelMatchesTheReferenceKernel) {
  for (auto act : {config::Activation::gelu, config::Activation::gelu_tanh}) {
    for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
      config::ModelConfig c;
      c.activation = act;
      c.hidden_dropout = c.attention_dropout = 0;
      c.activation_kernel = config::ActivationKernel::fused;
      const roformer::testing::LossAndGrads fused = roformer::testing::model_loss_and_grads(c, dtype);
      c.activation_kernel = config::ActivationKernel::reference;
      const roformer::testing::LossAndGrads reference = roformer::testing::model_loss_and_grads(c, dtype);
      roformer::testing::expect_same_loss_and_grads(fused, reference, dtype == torch::kFloat64 ? 1e-12 : 1e-5);
    }
  }
}

}  // namespace bias_gelu_test
