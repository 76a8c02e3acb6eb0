// The fused FIRE bias (ops/fire_bias) against FIRE's unfused formula: the piecewise MLP
// (FireMlpImpl::by_head) on the inputs fire_inputs forms, in double and in float, for contiguous,
// offset and unordered positions, every block of rows, fewer keys than positions, and an MLP with
// flat units (kinks at +inf); and a FIRE model evaluated without autograd (the fused path) against
// the same model with autograd on (the unfused one).
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "roformer/model/encoder.h"
#include "roformer/model/position/fire.h"
#include "roformer/ops/fire_bias/fire_bias.h"
#include "roformer/ops/piecewise_linear/piecewise_linear.h"
#include "tiny_models.h"

namespace fire_bias_test {

using namespace roformer;
using namespace roformer::model;

namespace {

torch::Tensor fused(FireMlp& m, const torch::Tensor& positions, int64_t begin, int64_t end, int64_t keys, double c,
                    double L, torch::Dtype dtype) {
  const FireMlpImpl::Piecewise f = m->piecewise(dtype);
  return ops::fire_bias({positions, begin, end, keys, c, L, FireImpl::kEps, f.kinks, f.slope, f.intercept});
}

torch::Tensor unfused(FireMlp& m, const torch::Tensor& positions, int64_t begin, int64_t end, int64_t keys, double c,
                      double L, torch::Dtype dtype) {
  const torch::Tensor ct = torch::tensor(c, dtype), Lt = torch::tensor(L, dtype);
  return m->by_head(fire_inputs(positions, ct, Lt, begin, end, false, keys).first);
}

}  // namespace

TEST(FireBias, EqualsThePiecewiseMlpOnTheUnfusedInputs) {
  torch::manual_seed(8);
  const int64_t S = 37;
  const std::vector<std::pair<const char*, torch::Tensor>> cases{
      {"contiguous", torch::arange(S)},
      {"offset", torch::arange(S) + 1000},
      {"unordered", torch::randint(0, 90, {S}, torch::kLong)},
  };
  for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
    FireMlp m = tiny_models::fire_mlp_with_flat_units(3, dtype);
    torch::NoGradGuard no_grad;
    const double tol = dtype == torch::kFloat64 ? 1e-12 : 2e-5;
    for (const auto& [name, positions] : cases)
      for (auto [begin, end, keys] :
           {std::tuple<int64_t, int64_t, int64_t>{0, S, S}, {5, 9, 9}, {30, 37, 37}, {12, 20, 33}}) {
        SCOPED_TRACE(std::string(name) + " rows " + std::to_string(begin) + "-" + std::to_string(end));
        const torch::Tensor want = unfused(m, positions, begin, end, keys, 0.37, 5.0, dtype);
        const torch::Tensor got = fused(m, positions, begin, end, keys, 0.37, 5.0, dtype);
        ASSERT_EQ(got.sizes(), want.sizes());
        EXPECT_EQ(got.scalar_type(), dtype);
        EXPECT_LE((got - want).abs().max().item<double>(), tol);
      }
  }
}

// A normaliser by the key's position instead of the query's (a mutated formula) is far from it.
TEST(FireBias, DiffersFromTheKeyNormalisedFormula) {
  FireMlp m = tiny_models::fire_mlp_with_flat_units(3, torch::kFloat64);
  torch::NoGradGuard no_grad;
  const torch::Tensor positions = torch::arange(30);
  const torch::Tensor ct = torch::tensor(0.37, torch::kFloat64), Lt = torch::tensor(2.0, torch::kFloat64);
  const torch::Tensor pos = positions.to(torch::kFloat64);
  const torch::Tensor distance = torch::log1p((ct * (pos.unsqueeze(1) - pos.unsqueeze(0))).abs());
  const torch::Tensor by_key = distance / (torch::log1p((ct * torch::maximum(pos, Lt)).abs()).unsqueeze(0) + 1e-6);
  const torch::Tensor mutated = m->by_head(by_key);
  EXPECT_GT((fused(m, positions, 0, 30, 30, 0.37, 2.0, torch::kFloat64) - mutated).abs().max().item<double>(), 1e-3);
}

TEST(FireBias, AModelEvaluatedWithoutAutogradEqualsItWithAutograd) {
  config::ModelConfig c = tiny_models::tiny_model(config::PositionKind::fire, config::Objective::causal_lm);
  c.position.fire.l_init = 8;
  torch::manual_seed(9);
  const torch::Tensor ids = torch::randint(0, c.vocab_size, {2, 40}, torch::kLong);
  EncoderModel m = build_model(c, 5);
  m->to(torch::kFloat64);
  m->eval();
  EncoderInput in;
  in.input_ids = ids;
  const torch::Tensor with_autograd = m->forward(in).detach();
  torch::NoGradGuard no_grad;
  EXPECT_LE((m->forward(in) - with_autograd).abs().max().item<double>(), 1e-12);
}

// ops/piecewise_linear (FireMlpImpl::by_head on the CPU; held to the MLP in double by
// FrontierPosition.FirePiecewiseMlpEqualsTheMlpInValuesAndGradients): its gradients are summed per
// fixed chunk of inputs, so one thread and two give the same bits, over several chunks.
TEST(PiecewiseLinear, GradientsDoNotDependOnTheThreadCount) {
  FireMlp m = tiny_models::fire_mlp_with_flat_units(3, torch::kFloat32);
  const FireMlpImpl::Piecewise f = m->piecewise(torch::kFloat32);
  torch::manual_seed(2);
  const torch::Tensor x0 = torch::rand({5, 4001});
  const torch::Tensor up = torch::randn({3, 5, 4001});
  auto grads = [&](int threads) {
    at::set_num_threads(threads);
    const torch::Tensor x = x0.clone().requires_grad_();
    const torch::Tensor s = f.slope.detach().clone().requires_grad_(),
                        i = f.intercept.detach().clone().requires_grad_();
    (ops::piecewise_linear(x, f.kinks, s, i) * up).sum().backward();
    return std::vector<torch::Tensor>{x.grad(), s.grad(), i.grad()};
  };
  const int threads = at::get_num_threads();
  const auto one = grads(1), two = grads(2);
  at::set_num_threads(threads);
  for (size_t k = 0; k < one.size(); ++k) EXPECT_TRUE(torch::equal(one[k], two[k])) << k;
}

TEST(FireBias, RefusesPositionsItCannotRead) {
  const torch::Tensor k = torch::zeros({2}), s = torch::zeros({1, 3});
  EXPECT_THROW(ops::fire_bias({torch::arange(4).to(torch::kFloat32), 0, 4, 4, 0.1, 1, 1e-6, k, s, s}), c10::Error);
  EXPECT_THROW(ops::fire_bias({torch::arange(4), 2, 5, 4, 0.1, 1, 1e-6, k, s, s}), c10::Error);
}

}  // namespace fire_bias_test
