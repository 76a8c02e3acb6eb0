// The fused residual add + LayerNorm op on the GPU: CUDA kernels against the CPU kernel in
// double (forward, the gradients of x, residual, weight and bias; every dtype; widths that take
// each register path, 8 and 32 values a lane and the uncached one; row counts that give the
// backward one and several rows per partial block), the same bits on a repeat, and a model step
// with model.norm_kernel=fused against the reference kernel. Skips without a GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "model_compare.h"
#include "roformer/model/encoder.h"
#include "roformer/ops/add_layer_norm/add_layer_norm.h"

namespace add_layer_norm_cuda_test {

using namespace roformer;

namespace {

bool have_gpu() {
  return torch::cuda::is_available();
}

struct Result {
  torch::Tensor y, grad_x, grad_residual, grad_weight, grad_bias;
};

Result run(const torch::Tensor& x0, const torch::Tensor& r0, const torch::Tensor& w0, const torch::Tensor& b0,
           const torch::Tensor& up) {
  torch::Tensor x = x0.clone().requires_grad_(true), r = r0.clone().requires_grad_(true);
  torch::Tensor w = w0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
  torch::Tensor y = ops::add_layer_norm(x, r, w, b, 1e-5);
  y.backward(up);
  return {y.detach().cpu(), x.grad().cpu(), r.grad().cpu(), w.grad().cpu(), b.grad().cpu()};
}

// |got - want| within tol relative to want's largest value, or within twice the error of the CPU
// kernel run in the GPU's dtype (`same`): rows of 3 columns with a tiny variance amplify rounding.
void expect_close(const torch::Tensor& got, const torch::Tensor& want, const torch::Tensor& same, double tol,
                  const std::string& what) {
  const torch::Tensor g = got.to(torch::kFloat64), e = want.to(torch::kFloat64);
  const double scale = std::max(1.0, e.abs().max().item<double>());
  const double cpu_error = (same.to(torch::kFloat64) - e).abs().max().item<double>();
  EXPECT_LE((g - e).abs().max().item<double>(), std::max(tol * scale, 2 * cpu_error)) << what;
}

}  // namespace

TEST(AddLayerNormCuda, MatchesTheCpuKernelForEveryDtypeAndWidth) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU visible";
  torch::manual_seed(7);
  for (auto dtype : {torch::kFloat32, torch::kFloat64, torch::kBFloat16, torch::kFloat16})
    for (int64_t cols : {1, 3, 100, 256, 257, 768, 1024, 1025, 4100})
      for (int64_t rows : {1, 7, 2500}) {
        const auto make = [&](double mean, double scale) {
          return (torch::randn({rows, cols}, torch::kFloat64) * scale + mean).to(dtype);
        };
        const torch::Tensor x = make(3, 2), r = make(-1, 1), up = make(0, 1);
        // A double model has double parameters; otherwise they stay fp32 (autocast's master weights).
        const auto param_dtype = dtype == torch::kFloat64 ? dtype : torch::kFloat32;
        const torch::Tensor w = (torch::randn({cols}) + 1).to(param_dtype), b = torch::randn({cols}).to(param_dtype);
        const Result cpu = run(x.to(torch::kFloat64), r.to(torch::kFloat64), w.to(torch::kFloat64),
                               b.to(torch::kFloat64), up.to(torch::kFloat64));
        const Result same = run(x, r, w, b, up);  // the CPU kernel in the GPU's dtype
        const Result gpu = run(x.cuda(), r.cuda(), w.cuda(), b.cuda(), up.cuda());
        const std::string at =
            std::string(c10::toString(dtype)) + " " + std::to_string(rows) + "x" + std::to_string(cols);
        ASSERT_EQ(gpu.y.scalar_type(), dtype) << at;
        const double tol = dtype == torch::kFloat64 ? 1e-12 : dtype == torch::kFloat32 ? 2e-6 : 1.6e-2;
        expect_close(gpu.y, cpu.y, same.y, tol, "y " + at);
        expect_close(gpu.grad_x, cpu.grad_x, same.grad_x, 4 * tol, "dx " + at);
        EXPECT_TRUE(torch::equal(gpu.grad_x, gpu.grad_residual)) << at;
        const double sum_tol = dtype == torch::kFloat64 ? 1e-12 : 1e-5;
        expect_close(gpu.grad_weight, cpu.grad_weight, same.grad_weight, sum_tol, "dw " + at);
        expect_close(gpu.grad_bias, cpu.grad_bias, same.grad_bias, sum_tol, "db " + at);
        if (rows == 2500 && dtype == torch::kBFloat16) {  // fixed reduction order: a repeat is identical
          const Result again = run(x.cuda(), r.cuda(), w.cuda(), b.cuda(), up.cuda());
          EXPECT_TRUE(torch::equal(again.grad_weight, gpu.grad_weight) && torch::equal(again.y, gpu.y)) << at;
        }
      }
}

TEST(AddLayerNormCuda, FusedModelStepMatchesTheReferenceKernel) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU visible";
  config::ModelConfig c;
  c.hidden_dropout = c.attention_dropout = 0;
  c.norm_kernel = config::NormKernel::fused;
  const roformer::testing::LossAndGrads fused =
      roformer::testing::model_loss_and_grads(c, torch::kFloat32, torch::kCUDA);
  c.norm_kernel = config::NormKernel::reference;
  const roformer::testing::LossAndGrads reference =
      roformer::testing::model_loss_and_grads(c, torch::kFloat32, torch::kCUDA);
  roformer::testing::expect_same_loss_and_grads(fused, reference, 1e-5);
}

}  // namespace add_layer_norm_cuda_test
