// The fused bias + GELU op on the GPU: CUDA kernels against the CPU kernel and the double
// formula (forward, d x and d bias; every dtype; both GELU forms; odd shapes), and a model
// step with model.activation_kernel=fused against the reference kernel. Skips without a GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model_compare.h"
#include "roformer/model/encoder.h"
#include "roformer/ops/feed_forward/bias_gelu.h"

namespace bias_gelu_cuda_test {

using namespace roformer;

namespace {

bool have_gpu() {
  return torch::cuda::is_available();
}

struct Result {
  torch::Tensor y, grad_x, grad_bias;
};

Result run(const torch::Tensor& x0, const torch::Tensor& bias0, const torch::Tensor& up, bool tanh_form) {
  torch::Tensor x = x0.clone().requires_grad_(true), bias = bias0.clone().requires_grad_(true);
  torch::Tensor y = ops::bias_gelu(x, bias, tanh_form);
  y.backward(up);
  return {y.detach().cpu(), x.grad().cpu(), bias.grad().cpu()};
}

}  // namespace

TEST(BiasGeluCuda, MatchesTheCpuKernelForEveryDtypeAndForm) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU visible";
  torch::manual_seed(7);
  for (auto dtype : {torch::kFloat32, torch::kFloat64, torch::kBFloat16, torch::kFloat16})
    for (bool tanh_form : {false, true})
      for (auto shape : {std::vector<int64_t>{3, 45, 37}, std::vector<int64_t>{64, 3072}, std::vector<int64_t>{1, 1}}) {
        const torch::Tensor x = (torch::randn(shape) * 3).to(dtype), up = torch::randn(shape).to(dtype);
        // A double model has double parameters; otherwise they stay fp32 (autocast's master weights).
        const torch::Tensor bias = torch::randn({shape.back()}).to(dtype == torch::kFloat64 ? dtype : torch::kFloat32);
        const Result cpu = run(x.to(torch::kFloat64), bias.to(torch::kFloat64), up.to(torch::kFloat64), tanh_form);
        const Result gpu = run(x.cuda(), bias.cuda(), up.cuda(), tanh_form);
        ASSERT_EQ(gpu.y.scalar_type(), dtype);
        const double tol = dtype == torch::kFloat64 ? 1e-12 : dtype == torch::kFloat32 ? 1e-5 : 2e-2;
        EXPECT_TRUE(torch::allclose(gpu.y.to(torch::kFloat64), cpu.y, tol, tol)) << dtype << " tanh " << tanh_form;
        EXPECT_TRUE(torch::allclose(gpu.grad_x.to(torch::kFloat64), cpu.grad_x, tol, tol)) << dtype;
        EXPECT_TRUE(torch::allclose(gpu.grad_bias.to(torch::kFloat64), cpu.grad_bias, 10 * tol, 10 * tol)) << dtype;
      }
}

TEST(BiasGeluCuda, FusedModelStepMatchesTheReferenceKernel) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU visible";
  config::ModelConfig c;
  c.hidden_dropout = c.attention_dropout = 0;
  c.activation_kernel = config::ActivationKernel::fused;
  const roformer::testing::LossAndGrads fused =
      roformer::testing::model_loss_and_grads(c, torch::kFloat32, torch::kCUDA);
  c.activation_kernel = config::ActivationKernel::reference;
  const roformer::testing::LossAndGrads reference =
      roformer::testing::model_loss_and_grads(c, torch::kFloat32, torch::kCUDA);
  roformer::testing::expect_same_loss_and_grads(fused, reference, 1e-5);
}

}  // namespace bias_gelu_cuda_test
