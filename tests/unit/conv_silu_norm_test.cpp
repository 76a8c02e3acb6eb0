// The short convolution + SiLU + group norm op (ops::conv_silu_norm) against LibTorch's form in
// double: conv1d's depthwise convolution padded by two and cut to S, SiLU, and each group scaled
// by 1 / sqrt(|y|^2 + eps); values and the gradients of x and the weight at lengths around the
// backward's chunks of 32 tokens, with the incoming gradient a strided slice as the model hands it;
// one thread and two the same bits; float near double; the inputs it refuses.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "roformer/ops/conv_silu_norm/conv_silu_norm.h"

namespace conv_silu_norm_test {

using namespace roformer;

namespace {

constexpr double kEps = 1e-6;

torch::Tensor reference(const torch::Tensor& x, const torch::Tensor& weight) {
  const int64_t B = x.size(0), S = x.size(1), G = x.size(2), D = x.size(3);
  const torch::Tensor u = torch::conv1d(x.reshape({B, S, G * D}).transpose(1, 2), weight, {}, 1, 2, 1, G * D)
                              .narrow(2, 0, S)
                              .transpose(1, 2);
  const torch::Tensor y = torch::silu(u).reshape({B, S, G, D});
  return y * torch::rsqrt((y * y).sum(-1, true) + kEps);
}

struct Leaves {
  torch::Tensor x, weight;
};

Leaves draw(int64_t B, int64_t S, int64_t G, int64_t D, torch::Dtype dtype, uint64_t seed) {
  torch::manual_seed(seed);
  return {torch::randn({B, S, G, D}, torch::dtype(dtype)).requires_grad_(true),
          (0.7 * torch::randn({G * D, 1, 3}, torch::dtype(dtype))).requires_grad_(true)};
}

// The output and the gradients of sum(out * weights), the weights read through a strided slice
// (the w columns of a [B, S, G, D + 2] gradient, as PaTH's state hands them back).
std::vector<torch::Tensor> with_gradients(const Leaves& l, const torch::Tensor& out) {
  const auto sizes = out.sizes();
  const torch::Tensor wide =
      torch::randn({sizes[0], sizes[1], sizes[2], sizes[3] + 2}, torch::kFloat64).to(out.dtype());
  const torch::Tensor weights = wide.narrow(3, 0, sizes[3]);
  const auto g = torch::autograd::grad({out}, {l.x, l.weight}, {weights});
  return {out.detach(), g[0], g[1]};
}

const char* kNames[] = {"output", "d x", "d weight"};

}  // namespace

TEST(ConvSiluNorm, EqualsLibTorchsFormInDouble) {
  for (const int64_t S : {1, 2, 3, 31, 32, 33, 70}) {
    SCOPED_TRACE("S " + std::to_string(S));
    const Leaves l = draw(2, S, 3, 8, torch::kFloat64, 10 + S);
    torch::manual_seed(1);
    const auto want = with_gradients(l, reference(l.x, l.weight));
    torch::manual_seed(1);
    const auto got = with_gradients(l, ops::conv_silu_norm(l.x, l.weight, kEps));
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(torch::allclose(got[i], want[i], 1e-12, 1e-12))
          << kNames[i] << ": largest difference " << (got[i] - want[i]).abs().max().item<double>();
  }
}

// The comparison above can fail: a tap moved by one token, or the norm's eps dropped on tiny rows,
// is seen.
TEST(ConvSiluNorm, AShiftedTapOrAnotherEpsIsSeen) {
  const Leaves l = draw(1, 20, 2, 8, torch::kFloat64, 3);
  const torch::Tensor want = reference(l.x, l.weight);
  EXPECT_TRUE(torch::allclose(ops::conv_silu_norm(l.x, l.weight, kEps), want, 1e-12, 1e-12));
  EXPECT_GT((ops::conv_silu_norm(l.x, l.weight.flip(-1), kEps) - want).abs().max().item<double>(), 1e-3);
  const torch::Tensor tiny = l.x * 1e-4;
  EXPECT_GT((ops::conv_silu_norm(tiny, l.weight, 1e-3) - reference(tiny, l.weight)).abs().max().item<double>(), 1e-3);
}

TEST(ConvSiluNorm, OneThreadAndTwoGiveTheSameBits) {
  const int threads = at::get_num_threads();
  const Leaves l = draw(3, 100, 4, 32, torch::kFloat32, 7);
  std::vector<std::vector<torch::Tensor>> runs;
  for (const int n : {1, 2}) {
    at::set_num_threads(n);
    torch::manual_seed(2);
    runs.push_back(with_gradients(l, ops::conv_silu_norm(l.x, l.weight, kEps)));
  }
  at::set_num_threads(threads);
  for (size_t i = 0; i < runs[0].size(); ++i) EXPECT_TRUE(torch::equal(runs[0][i], runs[1][i])) << kNames[i];
}

TEST(ConvSiluNorm, FloatIsNearDouble) {
  const Leaves l = draw(2, 65, 4, 32, torch::kFloat64, 9);
  torch::manual_seed(3);
  const auto want = with_gradients(l, reference(l.x, l.weight));
  const Leaves f{l.x.detach().to(torch::kFloat32).requires_grad_(true),
                 l.weight.detach().to(torch::kFloat32).requires_grad_(true)};
  torch::manual_seed(3);
  const auto got = with_gradients(f, ops::conv_silu_norm(f.x, f.weight, kEps));
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(torch::allclose(got[i].to(torch::kFloat64), want[i], 1e-4, 1e-4))
        << kNames[i] << ": largest difference " << (got[i].to(torch::kFloat64) - want[i]).abs().max().item<double>();
}

TEST(ConvSiluNorm, RefusesWhatItDoesNotTake) {
  EXPECT_TRUE(ops::conv_silu_norm_takes(torch::zeros({1, 4, 2, 8})));
  EXPECT_FALSE(ops::conv_silu_norm_takes(torch::zeros({1, 4, 16})));
  EXPECT_FALSE(ops::conv_silu_norm_takes(torch::zeros({1, 4, 2, 8}, torch::kBFloat16)));
  EXPECT_THROW(ops::conv_silu_norm(torch::zeros({1, 4, 2, 8}), torch::zeros({16, 1, 2}), kEps), std::exception);
  EXPECT_THROW(ops::conv_silu_norm(torch::zeros({1, 4, 2, 8}), torch::zeros({16, 1, 3}, torch::kFloat64), kEps),
               std::exception);
}

}  // namespace conv_silu_norm_test
