// The fused residual add + LayerNorm op (CPU kernel, and the formulas the CUDA kernel shares)
// against LayerNorm transcribed from Ba, Kiros & Hinton (2016) in double, differentiated by
// LibTorch's autograd in double: forward and the gradients of x, residual, weight and bias for
// every dtype and for widths that are not multiples of the kernel's 16 lanes; rows far from zero
// (where E[v^2] - mean^2 would lose the variance); constant and non-finite rows; any thread count;
// bad arguments; and the model with the fused kernel against the model with LibTorch's ops.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <vector>

#include "model_compare.h"
#include "roformer/model/encoder.h"
#include "roformer/ops/add_layer_norm/add_layer_norm.h"

namespace add_layer_norm_test {

using namespace roformer;

namespace {

constexpr double kEps = 1e-5;

struct Result {
  torch::Tensor y, grad_x, grad_residual, grad_weight, grad_bias;
};

// LayerNorm(x + residual) w + b, biased variance, in whatever dtype the inputs have.
torch::Tensor formula(const torch::Tensor& x, const torch::Tensor& r, const torch::Tensor& w, const torch::Tensor& b,
                      double eps) {
  const torch::Tensor v = x + r;
  const torch::Tensor mean = v.mean(-1, /*keepdim=*/true);
  const torch::Tensor var = (v - mean).pow(2).mean(-1, /*keepdim=*/true);
  return (v - mean) / torch::sqrt(var + eps) * w + b;
}

// Forward and backward (upstream gradient `up`) through the fused op or, with reference, the
// formula in double on the same inputs (cast up from their dtype).
Result run(const torch::Tensor& x0, const torch::Tensor& r0, const torch::Tensor& w0, const torch::Tensor& b0,
           const torch::Tensor& up, bool reference) {
  auto leaf = [&](const torch::Tensor& t) {
    return (reference ? t.to(torch::kFloat64) : t.clone()).requires_grad_(true);
  };
  torch::Tensor x = leaf(x0), r = leaf(r0), w = leaf(w0), b = leaf(b0);
  torch::Tensor y = reference ? formula(x, r, w, b, kEps) : ops::add_layer_norm(x, r, w, b, kEps);
  y.backward(reference ? up.to(torch::kFloat64) : up);
  return {y.detach(), x.grad(), r.grad(), w.grad(), b.grad()};
}

void expect_close(const torch::Tensor& got, const torch::Tensor& want, double tol, const std::string& what) {
  const torch::Tensor g = got.to(torch::kFloat64), e = want.to(torch::kFloat64);
  const double scale = std::max(1.0, e.abs().max().item<double>());
  const double err = (g - e).abs().max().item<double>();
  EXPECT_LE(err, tol * scale) << what << ": max error " << err << " (scale " << scale << ")";
}

// Error budgets relative to max(1, |value|): float accumulation, or the output's own rounding.
double tolerance(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat64:
      return 1e-12;
    case torch::kFloat32:
      return 2e-6;
    case torch::kFloat16:
      return 2e-3;
    default:
      return 1.6e-2;  // bfloat16: 8 significant bits
  }
}

}  // namespace

TEST(AddLayerNorm, FollowsTheFormulaInDoubleForEveryDtypeAndWidth) {
  torch::manual_seed(3);
  for (auto dtype : {torch::kFloat64, torch::kFloat32, torch::kFloat16, torch::kBFloat16})
    for (int64_t cols : {1, 3, 17, 64, 128, 768, 1031})
      for (int64_t rows : {1, 33, 70}) {
        const auto make = [&](double mean, double scale) {
          return (torch::randn({rows, cols}, torch::kFloat64) * scale + mean).to(dtype);
        };
        const torch::Tensor x = make(3, 2), r = make(-1, 1), up = make(0, 1);
        // Parameters are float32, or float64 with a float64 x (their gradients take their dtype).
        const auto param_dtype = dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
        const torch::Tensor w = (torch::randn({cols}) + 1).to(param_dtype), b = torch::randn({cols}).to(param_dtype);
        const Result fused = run(x, r, w, b, up, false), ref = run(x, r, w, b, up, true);
        const std::string at =
            std::string(c10::toString(dtype)) + " " + std::to_string(rows) + "x" + std::to_string(cols);
        ASSERT_EQ(fused.y.scalar_type(), dtype) << at;
        ASSERT_EQ(fused.grad_weight.scalar_type(), param_dtype) << at;
        const double tol = tolerance(dtype);
        expect_close(fused.y, ref.y, tol, "y " + at);
        expect_close(fused.grad_x, ref.grad_x, 4 * tol, "dx " + at);
        EXPECT_TRUE(torch::equal(fused.grad_x, fused.grad_residual)) << at;
        // Sums over rows of float products of the inputs: float accumulation error only.
        const double sum_tol = dtype == torch::kFloat64 ? 1e-12 : 1e-5;
        expect_close(fused.grad_weight, ref.grad_weight, sum_tol, "dw " + at);
        expect_close(fused.grad_bias, ref.grad_bias, sum_tol, "db " + at);
      }
}

TEST(AddLayerNorm, BatchedNonContiguousAndEmptyInputs) {
  torch::manual_seed(4);
  const torch::Tensor x = torch::randn({2, 24, 3, 5}).transpose(1, 3);  // [2, 5, 3, 24], not contiguous
  const torch::Tensor r = torch::randn({2, 5, 3, 24}), up = torch::randn({2, 5, 3, 24});
  const torch::Tensor w = torch::randn({24}), b = torch::randn({24});
  ASSERT_FALSE(x.is_contiguous());
  const Result fused = run(x, r, w, b, up, false), ref = run(x, r, w, b, up, true);
  EXPECT_EQ(fused.y.sizes(), x.sizes());
  expect_close(fused.y, ref.y, 2e-6, "y");
  expect_close(fused.grad_x, ref.grad_x, 1e-5, "dx");
  expect_close(fused.grad_weight, ref.grad_weight, 1e-5, "dw");

  const Result empty = run(torch::zeros({0, 8}), torch::zeros({0, 8}), w.narrow(0, 0, 8), b.narrow(0, 0, 8),
                           torch::zeros({0, 8}), false);
  EXPECT_EQ(empty.y.sizes(), (std::vector<int64_t>{0, 8}));
  EXPECT_TRUE(torch::equal(empty.grad_weight, torch::zeros({8})));
}

// Rows of 1e4 + N(0, 1) in float: E[v^2] - mean^2 would cancel ~8 of float's 7 digits; the
// two-pass variance keeps xhat within float accuracy of the double formula.
TEST(AddLayerNorm, RowsFarFromZeroKeepTheirVariance) {
  torch::manual_seed(5);
  const torch::Tensor x = (torch::randn({16, 256}, torch::kFloat64) + 1e4).to(torch::kFloat32);
  const torch::Tensor r = torch::zeros({16, 256}), w = torch::ones({256}), b = torch::zeros({256});
  const torch::Tensor y = ops::add_layer_norm(x, r, w, b, kEps);
  const torch::Tensor ref =
      formula(x.to(torch::kFloat64), r.to(torch::kFloat64), w.to(torch::kFloat64), b.to(torch::kFloat64), kEps);
  // Each x is exact in float; the sum's rounding (1e4 * 6e-8 = 6e-4 absolute) is the limit.
  expect_close(y, ref, 2e-3, "y far from zero");
  const torch::Tensor var = y.to(torch::kFloat64).var(-1, /*unbiased=*/false);
  EXPECT_TRUE(torch::allclose(var, torch::ones_like(var), 1e-3, 1e-3)) << var;
}

TEST(AddLayerNorm, ConstantRowsGiveTheBiasAndNonFiniteRowsStayInTheirRow) {
  const torch::Tensor x = torch::full({3, 40}, 2.5), r = torch::full({3, 40}, -0.5);
  const torch::Tensor w = torch::randn({40}), b = torch::randn({40});
  const torch::Tensor up = torch::randn({3, 40});
  const Result fused = run(x, r, w, b, up, false), ref = run(x, r, w, b, up, true);
  EXPECT_TRUE(torch::equal(fused.y, b.expand({3, 40}))) << "xhat is exactly 0 in a constant row";
  // dL/dv = rstd (gw - mean(gw)) with rstd = 1/sqrt(eps): large, finite, as the formula says.
  expect_close(fused.grad_x, ref.grad_x, 2e-6, "dx of a constant row");
  expect_close(fused.grad_weight, ref.grad_weight, 1e-6, "dw of a constant row");

  torch::Tensor xn = torch::randn({3, 40});
  xn[1][7] = std::numeric_limits<float>::quiet_NaN();
  const torch::Tensor y = ops::add_layer_norm(xn, torch::zeros({3, 40}), w, b, kEps);
  EXPECT_TRUE(torch::isnan(y[1]).all().item<bool>());
  EXPECT_TRUE(torch::isfinite(y[0]).all().item<bool>() && torch::isfinite(y[2]).all().item<bool>());
}

// x and residual are one tensor: autograd adds the op's two (equal) gradients.
TEST(AddLayerNorm, TheSameTensorAsXAndResidualGetsBothGradients) {
  torch::manual_seed(6);
  const torch::Tensor x0 = torch::randn({9, 33}), w = torch::randn({33}), b = torch::randn({33});
  const torch::Tensor up = torch::randn({9, 33});
  torch::Tensor x = x0.clone().requires_grad_(true);
  ops::add_layer_norm(x, x, w, b, kEps).backward(up);
  torch::Tensor xd = x0.to(torch::kFloat64).requires_grad_(true);
  formula(xd, xd, w.to(torch::kFloat64), b.to(torch::kFloat64), kEps).backward(up.to(torch::kFloat64));
  expect_close(x.grad(), xd.grad(), 1e-5, "d(x, x)");
}

TEST(AddLayerNorm, SameBitsForAnyThreadCount) {
  torch::manual_seed(7);
  const torch::Tensor x = torch::randn({300, 96}), r = torch::randn({300, 96}), up = torch::randn({300, 96});
  const torch::Tensor w = torch::randn({96}), b = torch::randn({96});
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const Result one = run(x, r, w, b, up, false);
  at::set_num_threads(std::max(2, threads));
  const Result two = run(x, r, w, b, up, false);
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(one.y, two.y));
  EXPECT_TRUE(torch::equal(one.grad_x, two.grad_x));
  EXPECT_TRUE(torch::equal(one.grad_weight, two.grad_weight));
  EXPECT_TRUE(torch::equal(one.grad_bias, two.grad_bias));
}

TEST(AddLayerNorm, RefusesMismatchedArguments) {
  const torch::Tensor x = torch::zeros({2, 5}), w = torch::ones({5}), b = torch::zeros({5});
  EXPECT_THROW(ops::add_layer_norm(x, torch::zeros({2, 4}), w, b, kEps), c10::Error);
  EXPECT_THROW(ops::add_layer_norm(x, torch::zeros({2, 5}, torch::kFloat64), w, b, kEps), c10::Error);
  EXPECT_THROW(ops::add_layer_norm(x, x, torch::ones({4}), b, kEps), c10::Error);
  EXPECT_THROW(ops::add_layer_norm(x, x, w, torch::zeros({5, 1}), kEps), c10::Error);
  EXPECT_THROW(ops::add_layer_norm(x.to(torch::kLong), x.to(torch::kLong), w, b, kEps), c10::Error);
  EXPECT_THROW(ops::add_layer_norm(x, x, w, b, 0.0), c10::Error);
  EXPECT_THROW(
      ops::add_layer_norm(torch::zeros({2, 0}), torch::zeros({2, 0}), torch::ones({0}), torch::zeros({0}), kEps),
      c10::Error);
}

TEST(AddLayerNorm, ModelWithTheFusedKernelMatchesTheReferenceKernel) {
  for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
    config::ModelConfig c;
    c.hidden_dropout = c.attention_dropout = 0;
    c.norm_kernel = config::NormKernel::fused;
    const roformer::testing::LossAndGrads fused = roformer::testing::model_loss_and_grads(c, dtype);
    c.norm_kernel = config::NormKernel::reference;
    const roformer::testing::LossAndGrads reference = roformer::testing::model_loss_and_grads(c, dtype);
    roformer::testing::expect_same_loss_and_grads(fused, reference, dtype == torch::kFloat64 ? 1e-12 : 1e-5);
  }
}

// Inference (no autograd node) takes the same kernel and gives the same hidden states.
TEST(AddLayerNorm, InferenceWithTheFusedKernelMatchesTheReferenceKernel) {
  config::ModelConfig c;
  c.norm_kernel = config::NormKernel::fused;
  model::EncoderModel fused = model::build_model(c, 11);
  c.norm_kernel = config::NormKernel::reference;
  model::EncoderModel reference = model::build_model(c, 11);
  fused->eval();
  reference->eval();
  const torch::NoGradGuard no_grad;
  model::EncoderInput in;
  in.input_ids = torch::randint(0, c.vocab_size, {2, 24}, torch::kLong);
  const torch::Tensor a = fused->forward(in), b = reference->forward(in);
  EXPECT_TRUE(torch::allclose(a, b, 1e-5, 1e-5)) << (a - b).abs().max();
}

}  // namespace add_layer_norm_test
