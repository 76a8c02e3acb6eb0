// The blocked feed-forward op (ops/feed_forward) against the unfused layers in double:
// GELU(x W1^T + b1) W2^T + b2 through at::linear and LibTorch's GELU, output and all five
// gradients, on shapes with partial blocks, both GELU forms; float against the same double
// reference; results the same bits for any thread count; the no-grad path; empty input; what it
// refuses; and the encoder layer picking it where model.activation_kernel says.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>
#include <string>
#include <vector>

#include "model_compare.h"
#include "roformer/ops/feed_forward/feed_forward.h"
#include "roformer/ops/feed_forward/feed_forward_kernels.h"

namespace feed_forward_test {

using namespace roformer;

namespace {

struct Inputs {
  torch::Tensor x, w1, b1, w2, b2, upstream;
};

// x [batch, seq, H], F hidden features, H2 outputs; weights at the scale of a layer's init.
Inputs make_inputs(int64_t batch, int64_t seq, int64_t H, int64_t F, int64_t H2, uint64_t seed) {
  torch::manual_seed(seed);
  const auto d = torch::kFloat64;
  return {torch::randn({batch, seq, H}, d), torch::randn({F, H}, d) / std::sqrt(double(H)),
          torch::randn({F}, d) * 0.5,       torch::randn({H2, F}, d) / std::sqrt(double(F)),
          torch::randn({H2}, d) * 0.5,      torch::randn({batch, seq, H2}, d)};
}

struct Result {
  torch::Tensor y, dx, dw1, db1, dw2, db2;
};

// Forward and backward (against `upstream`) in `dtype`, through the op or the unfused layers.
Result run(const Inputs& in, bool tanh_form, torch::Dtype dtype, bool op) {
  auto leaf = [&](const torch::Tensor& t) { return t.to(dtype).clone().requires_grad_(true); };
  torch::Tensor x = leaf(in.x), w1 = leaf(in.w1), b1 = leaf(in.b1), w2 = leaf(in.w2), b2 = leaf(in.b2);
  torch::Tensor y = op ? ops::feed_forward(x, w1, b1, w2, b2, tanh_form)
                       : at::linear(torch::gelu(at::linear(x, w1, b1), tanh_form ? "tanh" : "none"), w2, b2);
  y.backward(in.upstream.to(dtype));
  return {y.detach(), x.grad(), w1.grad(), b1.grad(), w2.grad(), b2.grad()};
}

void expect_close(const Result& a, const Result& b, double tol) {
  auto check = [&](const torch::Tensor& u, const torch::Tensor& v, const char* what) {
    const torch::Tensor ud = u.to(torch::kFloat64), vd = v.to(torch::kFloat64);
    ASSERT_EQ(ud.sizes(), vd.sizes()) << what;
    const double scale = std::max(1.0, vd.abs().max().item<double>());
    EXPECT_LE((ud - vd).abs().max().item<double>(), tol * scale) << what;
  };
  check(a.y, b.y, "y");
  check(a.dx, b.dx, "dx");
  check(a.dw1, b.dw1, "dw1");
  check(a.db1, b.db1, "db1");
  check(a.dw2, b.dw2, "dw2");
  check(a.db2, b.db2, "db2");
}

bool same_bits(const Result& a, const Result& b) {
  return torch::equal(a.y, b.y) && torch::equal(a.dx, b.dx) && torch::equal(a.dw1, b.dw1) &&
         torch::equal(a.db1, b.db1) && torch::equal(a.dw2, b.dw2) && torch::equal(a.db2, b.db2);
}

}  // namespace

TEST(FeedForward, MatchesTheUnfusedLayersInDoubleWithGradients) {
  // 111 rows (one partial block), 260 rows (two whole blocks and a partial one), 128 (exactly one);
  // output width unlike the input's.
  const std::vector<std::vector<int64_t>> shapes = {{3, 37, 16, 40, 12}, {2, 130, 24, 64, 24}, {1, 128, 8, 32, 8}};
  for (const auto& s : shapes) {
    const Inputs in = make_inputs(s[0], s[1], s[2], s[3], s[4], 3);
    for (bool tanh_form : {false, true}) {
      SCOPED_TRACE(std::to_string(s[0] * s[1]) + " rows, tanh " + std::to_string(tanh_form));
      expect_close(run(in, tanh_form, torch::kFloat64, true), run(in, tanh_form, torch::kFloat64, false), 1e-12);
    }
  }
}

TEST(FeedForward, FloatFollowsTheDoubleReference) {
  const Inputs in = make_inputs(2, 150, 32, 128, 32, 5);
  for (bool tanh_form : {false, true}) {
    SCOPED_TRACE(tanh_form ? "tanh" : "erf");
    expect_close(run(in, tanh_form, torch::kFloat32, true), run(in, tanh_form, torch::kFloat64, false), 2e-5);
  }
}

TEST(FeedForward, ResultDoesNotDependOnTheThreadCount) {
  const Inputs in = make_inputs(4, 150, 32, 128, 32, 7);  // 600 rows: 5 blocks, the last partial
  const int threads = at::get_num_threads();
  std::vector<Result> results;
  for (const int n : {1, 2, 3}) {
    at::set_num_threads(n);
    results.push_back(run(in, false, torch::kFloat32, true));
  }
  at::set_num_threads(threads);
  for (size_t i = 1; i < results.size(); ++i) EXPECT_TRUE(same_bits(results[i], results[0])) << "threads " << i + 1;
}

TEST(FeedForward, NoGradAndInferenceForwardAreTheSameAndKeepNothing) {
  const Inputs in = make_inputs(2, 70, 16, 64, 16, 9);
  const Result with_grad = run(in, false, torch::kFloat32, true);
  const torch::NoGradGuard no_grad;
  auto f = [](const torch::Tensor& t) { return t.to(torch::kFloat32).requires_grad_(true); };
  const torch::Tensor y = ops::feed_forward(f(in.x), f(in.w1), f(in.b1), f(in.w2), f(in.b2), false);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(torch::equal(y, with_grad.y));
  const c10::InferenceMode inference;  // the worker threads write inference tensors too
  const torch::Tensor xi = in.x.to(torch::kFloat32);
  auto g = [](const torch::Tensor& t) { return t.to(torch::kFloat32); };
  EXPECT_TRUE(torch::equal(ops::feed_forward(xi, g(in.w1), g(in.b1), g(in.w2), g(in.b2), false), with_grad.y));
}

TEST(FeedForward, EmptyInputGivesEmptyOutputAndZeroWeightGradients) {
  Inputs in = make_inputs(1, 4, 8, 16, 8, 1);
  in.x = in.x.narrow(1, 0, 0);
  in.upstream = in.upstream.narrow(1, 0, 0);
  const Result r = run(in, false, torch::kFloat64, true);
  EXPECT_EQ(r.y.sizes(), (std::vector<int64_t>{1, 0, 8}));
  EXPECT_EQ(r.dx.sizes(), in.x.sizes());
  EXPECT_EQ(r.dw1.abs().sum().item<double>(), 0.0);
  EXPECT_EQ(r.db2.abs().sum().item<double>(), 0.0);
}

TEST(FeedForward, SaysWhatItTakesAndRefusesTheRest) {
  const torch::Tensor x = torch::randn({2, 8}), w1 = torch::randn({16, 8}), b1 = torch::randn({16});
  const torch::Tensor w2 = torch::randn({8, 16}), b2 = torch::randn({8});
  EXPECT_TRUE(ops::feed_forward_supports(x, w1, b1, w2, b2));
  auto d = [](const torch::Tensor& t) { return t.to(torch::kFloat64); };
  EXPECT_TRUE(ops::feed_forward_supports(d(x), d(w1), d(b1), d(w2), d(b2)));
  auto h = [](const torch::Tensor& t) { return t.to(torch::kBFloat16); };
  EXPECT_FALSE(ops::feed_forward_supports(h(x), h(w1), h(b1), h(w2), h(b2)));  // bf16: the unfused layers'
  EXPECT_FALSE(ops::feed_forward_supports(x, d(w1), b1, w2, b2));              // mixed dtypes
  EXPECT_FALSE(ops::feed_forward_supports(x, w1.t(), b1, w2, b2));             // w1 of another shape
  EXPECT_FALSE(ops::feed_forward_supports(x, w1, b1, w2, torch::randn({7})));  // b2 of another width
  EXPECT_FALSE(ops::feed_forward_supports(x, w1, torch::Tensor(), w2, b2));    // no bias
  try {
    ops::feed_forward(x, w1, b1, w2.t(), b2, false);
    ADD_FAILURE() << "a w2 of the wrong shape must be refused";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("w2 [H', F]"), std::string::npos) << e.what();
  }
}

// Whether the autograd graph behind `t` holds a node whose name contains `part`.
bool graph_has(const torch::Tensor& t, const std::string& part) {
  std::vector<torch::autograd::Node*> todo{t.grad_fn().get()};
  std::set<torch::autograd::Node*> seen;
  while (!todo.empty()) {
    torch::autograd::Node* n = todo.back();
    todo.pop_back();
    if (!n || !seen.insert(n).second) continue;
    if (n->name().find(part) != std::string::npos) return true;
    for (const auto& e : n->next_edges()) todo.push_back(e.function.get());
  }
  return false;
}

TEST(FeedForward, EncoderLayerTakesTheOpWhereTheKernelChoiceSays) {
  auto uses_op = [](config::ModelConfig c) {
    model::EncoderModel m = model::build_model(c, 3);
    model::EncoderInput in;
    in.input_ids = torch::randint(0, c.vocab_size, {2, 16}, torch::kLong);
    return graph_has(m->loss(in, in.input_ids), "FeedForwardFunction");
  };
  config::ModelConfig c;
  EXPECT_TRUE(uses_op(c));  // auto, GELU, float32 on the CPU
  c.activation_kernel = config::ActivationKernel::fused;
  EXPECT_TRUE(uses_op(c));
  c.activation_kernel = config::ActivationKernel::reference;
  EXPECT_FALSE(uses_op(c));
  c.activation_kernel = config::ActivationKernel::auto_;
  c.activation = config::Activation::relu;
  EXPECT_FALSE(uses_op(c));
  c.activation = config::Activation::gelu;
  c.hidden_size = 512;  // auto: a 2048 x 512 weight (4 MiB) does not fit a core's cache
  c.ffn_size = 2048;
  c.num_heads = 8;
  c.num_layers = 1;
  EXPECT_FALSE(uses_op(c));
  c.activation_kernel = config::ActivationKernel::fused;
  EXPECT_TRUE(uses_op(c));
}

TEST(FeedForward, FitsTheCacheAtTheQuickstartShapeAndNotAtTheMediumOne) {
  EXPECT_TRUE(ops::feed_forward_fits_cache(512, 128, 4));    // 256 + 256 KiB
  EXPECT_FALSE(ops::feed_forward_fits_cache(2048, 512, 4));  // 1 + 4 MiB
  EXPECT_FALSE(ops::feed_forward_fits_cache(3072, 768, 4));  // BERT-base
}

// The encoder layer: auto (the op on the CPU) against reference (at::linear and LibTorch's GELU),
// with a batch of 160 rows (a whole block and a partial one), loss and every gradient.
TEST(FeedForward, ModelWithTheOpMatchesTheModelWithTheUnfusedLayers) {
  for (auto act : {config::Activation::gelu, config::Activation::gelu_tanh}) {
    for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
      config::ModelConfig c;
      c.activation = act;
      c.hidden_dropout = c.attention_dropout = 0;
      c.activation_kernel = config::ActivationKernel::auto_;
      const roformer::testing::LossAndGrads op = roformer::testing::model_loss_and_grads(c, dtype, torch::kCPU, 5);
      c.activation_kernel = config::ActivationKernel::reference;
      const roformer::testing::LossAndGrads ref = roformer::testing::model_loss_and_grads(c, dtype, torch::kCPU, 5);
      SCOPED_TRACE(c10::toString(dtype));
      roformer::testing::expect_same_loss_and_grads(op, ref, dtype == torch::kFloat64 ? 1e-12 : 1e-5);
    }
  }
}

}  // namespace feed_forward_test
