// The fused RoPE op (CPU kernel, the math the CUDA kernel shares) against the reference
// rotation: every combination of layout, pairing, partial rotary, position mode, scaling and
// in-place, in fp64 (<= 1e-12), fp32 (1e-6 relative), bf16/fp16 (against the fp32 reference
// cast to the dtype); odd shapes and strides; gradients by finite differences and against the
// reference's autograd; positions up to 1e6 and a dense grid of angles within the documented
// error budget; the (cos, sin) table path equal to computing, bit for bit; and the
// TORCH_LIBRARY registration reached through the dispatcher.
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "roformer/model/position/rope_frequencies.h"
#include "roformer/model/position/rope_reference.h"
#include "roformer/ops/rope/rope.h"
#include "roformer/ops/rope/rope_math.h"

namespace rope_op_test {

using namespace roformer;
using namespace roformer::model;
using ops::RopeLayout;
using ops::RopeSpec;

namespace {

struct Case {
  RopeLayout layout;
  bool interleaved;
  int64_t rotary_dim;  // 0 = full
  int position_mode;   // 0 shared [S], 1 explicit [B,S], 2 offsets [B]
  config::RopeScalingKind scaling;
  bool inplace;
};

std::string describe(const Case& c) {
  return std::string(c.layout == RopeLayout::bshd ? "bshd" : "bhsd") + (c.interleaved ? " interleaved" : " half") +
         " rd=" + std::to_string(c.rotary_dim) + " pos=" + std::to_string(c.position_mode) +
         " scaling=" + config::rope_scaling_kind_names().name(c.scaling) + (c.inplace ? " inplace" : "");
}

RopeSpec make_spec(const RopeFrequencies& f, const Case& c, int64_t rotary_dim) {
  RopeSpec s;
  s.inv_freq = torch::tensor(f.inv_freq, torch::kFloat64);
  s.position_scale = f.position_scale;
  s.magnitude = f.magnitude;
  s.interleaved = c.interleaved;
  s.rotary_dim = rotary_dim;
  s.layout = c.layout;
  s.position_offsets = c.position_mode == 2;
  return s;
}

// Reference result for x given in `layout`; positions explicit [B, S] or shared [S].
torch::Tensor reference(const torch::Tensor& x, RopeLayout layout, const torch::Tensor& explicit_positions,
                        const RopeFrequencies& f, bool interleaved, int64_t rotary_dim, double magnitude) {
  RopeFrequencies g = f;
  g.magnitude = magnitude;
  const torch::Tensor bhsd = layout == RopeLayout::bshd ? x.transpose(1, 2) : x;
  const torch::Tensor out =
      rope_reference(bhsd, explicit_positions, g,
                     interleaved ? config::RopePairing::interleaved : config::RopePairing::half, rotary_dim);
  return layout == RopeLayout::bshd ? out.transpose(1, 2) : out;
}

void check_case(const Case& c, torch::ScalarType dtype) {
  SCOPED_TRACE(describe(c) + " " + std::string(c10::toString(dtype)));
  const int64_t B = 2, S = 5, Hq = 3, Hk = 2, D = 16;
  const int64_t rd = c.rotary_dim > 0 ? c.rotary_dim : D;
  config::RopeConfig rc;
  rc.scaling.kind = c.scaling;
  rc.scaling.factor = 3.0;
  rc.scaling.original_max_positions = 4;
  const RopeFrequencies f = rope_frequencies(rc, rd, S);
  const RopeSpec spec = make_spec(f, c, c.rotary_dim);
  auto shape = [&](int64_t H) {
    return c.layout == RopeLayout::bshd ? std::vector<int64_t>{B, S, H, D} : std::vector<int64_t>{B, H, S, D};
  };
  torch::manual_seed(42);
  const torch::Tensor q64 = torch::randn(shape(Hq), torch::kFloat64), k64 = torch::randn(shape(Hk), torch::kFloat64),
                      v64 = torch::randn(shape(Hk), torch::kFloat64);
  torch::Tensor explicit_pos = (torch::arange(S, torch::kLong) + torch::tensor({0L, 7L}).unsqueeze(1)) * 3;  // [B,S]
  torch::Tensor positions;
  if (c.position_mode == 0) {
    positions = torch::arange(S, torch::kLong) * 11 + 2;
    explicit_pos = positions;
  } else if (c.position_mode == 1) {
    positions = explicit_pos;
  } else {
    positions = torch::tensor({4L, 1000L});
    explicit_pos = positions.unsqueeze(1) + torch::arange(S, torch::kLong);
  }
  // Reference in double (fp64 inputs) or fp32 (fp32 inputs and the half-precision comparison).
  const auto ref_dtype = dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const torch::Tensor q = q64.to(dtype), k = k64.to(dtype), v = v64.to(dtype);
  const torch::Tensor rq =
      reference(q.to(ref_dtype), c.layout, explicit_pos, f, c.interleaved, rd, f.magnitude).to(dtype);
  const torch::Tensor rk =
      reference(k.to(ref_dtype), c.layout, explicit_pos, f, c.interleaved, rd, f.magnitude).to(dtype);
  const torch::Tensor rv = reference(v.to(ref_dtype), c.layout, explicit_pos, f, c.interleaved, rd, 1.0).to(dtype);
  std::vector<torch::Tensor> out;
  if (c.inplace) {
    out = {q.clone(), k.clone(), v.clone()};
    ops::rope_(out, positions, spec);
  } else {
    out = ops::rope({q, k, v}, positions, spec);
  }
  double rtol = 0, atol = 0;
  if (dtype == torch::kFloat64) {
    atol = 1e-12;
  } else if (dtype == torch::kFloat32) {
    rtol = 1e-6, atol = 1e-6;
  } else {
    rtol = 1.0 / 128, atol = 1e-2;  // one rounding of bf16/fp16 around the fp32 value
  }
  EXPECT_TRUE(torch::allclose(out[0].to(torch::kFloat64), rq.to(torch::kFloat64), rtol, atol))
      << (out[0] - rq).abs().max().item<double>();
  EXPECT_TRUE(torch::allclose(out[1].to(torch::kFloat64), rk.to(torch::kFloat64), rtol, atol))
      << (out[1] - rk).abs().max().item<double>();
  EXPECT_TRUE(torch::allclose(out[2].to(torch::kFloat64), rv.to(torch::kFloat64), rtol, atol))
      << (out[2] - rv).abs().max().item<double>();
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (RopeLayout layout : {RopeLayout::bshd, RopeLayout::bhsd})
    for (bool interleaved : {true, false})
      for (int64_t rd : {0, 8})
        for (int mode : {0, 1, 2})
          for (auto scaling :
               {config::RopeScalingKind::none, config::RopeScalingKind::linear, config::RopeScalingKind::ntk,
                config::RopeScalingKind::dynamic_ntk, config::RopeScalingKind::yarn})
            for (bool inplace : {false, true}) cases.push_back({layout, interleaved, rd, mode, scaling, inplace});
  return cases;
}

}  // namespace

TEST(RopeOp, MatchesReferenceInDoubleForEveryCombination) {
  for (const Case& c : all_cases()) check_case(c, torch::kFloat64);
}

TEST(RopeOp, MatchesReferenceInFloat32ForEveryCombination) {
  for (const Case& c : all_cases()) check_case(c, torch::kFloat32);
}

TEST(RopeOp, MatchesFloat32ReferenceInBFloat16AndFloat16) {
  for (const Case& c : all_cases()) {
    if (c.scaling != config::RopeScalingKind::none && c.scaling != config::RopeScalingKind::yarn) continue;
    check_case(c, torch::kBFloat16);
    check_case(c, torch::kFloat16);
  }
}

TEST(RopeOp, OddShapesAndNonContiguousInputs) {
  config::RopeConfig rc;
  for (auto dims : std::vector<std::vector<int64_t>>{{1, 1, 1, 2}, {3, 1, 1, 2}, {1, 7, 1, 6}, {2, 3, 4, 10}}) {
    const int64_t D = dims[3];
    const RopeFrequencies f = rope_frequencies(rc, D, dims[2]);
    RopeSpec spec;
    spec.inv_freq = torch::tensor(f.inv_freq, torch::kFloat64);
    for (bool interleaved : {true, false}) {
      spec.interleaved = interleaved;
      // A non-contiguous view: every other head of a wider tensor, features strided by 2.
      const torch::Tensor big = torch::randn({dims[0], dims[1] * 2, dims[2], D * 2}, torch::kFloat64);
      const torch::Tensor x = big.slice(1, 0, dims[1] * 2, 2).slice(3, 0, D * 2, 2);
      ASSERT_FALSE(x.is_contiguous());
      const torch::Tensor pos = torch::arange(dims[2], torch::kLong) + 5;
      const torch::Tensor out = ops::rope({x}, pos, spec)[0];
      const torch::Tensor ref =
          rope_reference(x, pos, f, interleaved ? config::RopePairing::interleaved : config::RopePairing::half, D);
      EXPECT_LT((out - ref).abs().max().item<double>(), 1e-12);
      const torch::Tensor before = big.clone();
      ops::rope_({x}, pos, spec);  // in place through the strided view
      EXPECT_LT((x - ref).abs().max().item<double>(), 1e-12);
      // Elements outside the view are untouched.
      EXPECT_TRUE(torch::equal(big.slice(3, 1, D * 2, 2), before.slice(3, 1, D * 2, 2)));
    }
  }
}

TEST(RopeOp, GradientsMatchFiniteDifferencesAndTheReference) {
  config::RopeConfig rc;
  rc.scaling.kind = config::RopeScalingKind::yarn;
  rc.scaling.factor = 2.0;
  rc.scaling.original_max_positions = 4;
  const int64_t D = 8, rd = 6;
  const RopeFrequencies f = rope_frequencies(rc, rd, 5);
  for (bool interleaved : {true, false}) {
    RopeSpec spec;
    spec.inv_freq = torch::tensor(f.inv_freq, torch::kFloat64);
    spec.magnitude = f.magnitude;
    spec.position_scale = f.position_scale;
    spec.interleaved = interleaved;
    spec.rotary_dim = rd;
    spec.layout = RopeLayout::bshd;
    torch::manual_seed(9);
    torch::Tensor q = torch::randn({2, 5, 2, D}, torch::kFloat64).requires_grad_();
    torch::Tensor k = torch::randn({2, 5, 1, D}, torch::kFloat64).requires_grad_();
    const torch::Tensor wq = torch::randn({2, 5, 2, D}, torch::kFloat64),
                        wk = torch::randn({2, 5, 1, D}, torch::kFloat64);
    const torch::Tensor pos = torch::arange(5, torch::kLong) * 13;
    auto objective = [&](const torch::Tensor& qq, const torch::Tensor& kk) {
      const auto out = ops::rope({qq, kk}, pos, spec);
      return (out[0] * wq).sum() + (out[1] * wk).sum();
    };
    objective(q, k).backward();
    const auto pairing = interleaved ? config::RopePairing::interleaved : config::RopePairing::half;
    // Reference autograd gradient.
    torch::Tensor q2 = q.detach().clone().requires_grad_(), k2 = k.detach().clone().requires_grad_();
    const torch::Tensor ref = (rope_reference(q2.transpose(1, 2), pos, f, pairing, rd).transpose(1, 2) * wq).sum() +
                              (rope_reference(k2.transpose(1, 2), pos, f, pairing, rd).transpose(1, 2) * wk).sum();
    ref.backward();
    EXPECT_LT((q.grad() - q2.grad()).abs().max().item<double>(), 1e-12);
    EXPECT_LT((k.grad() - k2.grad()).abs().max().item<double>(), 1e-12);
    // Finite differences on every element of k and a sample of q.
    torch::NoGradGuard no_grad;
    const double eps = 1e-6;
    for (int64_t i = 0; i < k.numel(); ++i) {
      torch::Tensor kp = k.detach().clone(), km = k.detach().clone();
      kp.view({-1})[i] += eps;
      km.view({-1})[i] -= eps;
      const double fd = (objective(q.detach(), kp) - objective(q.detach(), km)).item<double>() / (2 * eps);
      EXPECT_NEAR(k.grad().view({-1})[i].item<double>(), fd, 1e-7);
    }
    for (int64_t i = 0; i < q.numel(); i += 7) {
      torch::Tensor qp = q.detach().clone(), qm = q.detach().clone();
      qp.view({-1})[i] += eps;
      qm.view({-1})[i] -= eps;
      const double fd = (objective(qp, k.detach()) - objective(qm, k.detach())).item<double>() / (2 * eps);
      EXPECT_NEAR(q.grad().view({-1})[i].item<double>(), fd, 1e-7);
    }
  }
}

TEST(RopeOp, UnusedOutputsGetZeroGradients) {
  RopeSpec spec;
  spec.inv_freq = torch::tensor(std::vector<double>{1.0, 0.1}, torch::kFloat64);
  torch::Tensor q = torch::randn({1, 2, 3, 4}, torch::kFloat64).requires_grad_();
  torch::Tensor k = torch::randn({1, 2, 3, 4}, torch::kFloat64).requires_grad_();
  const auto out = ops::rope({q, k}, torch::arange(3, torch::kLong), spec);
  out[0].sum().backward();
  ASSERT_TRUE(k.grad().defined());
  EXPECT_EQ(k.grad().abs().max().item<double>(), 0.0);
}

TEST(RopeOp, PositionsUpToAMillionStayWithinTheErrorBudget) {
  // fp32 output against the fp64 reference: the documented budget is 5e-7 on unit pairs.
  const int64_t D = 128;
  config::RopeConfig rc;
  const RopeFrequencies f = rope_frequencies(rc, D, 0);
  RopeSpec spec;
  spec.inv_freq = torch::tensor(f.inv_freq, torch::kFloat64);
  torch::Tensor x = torch::zeros({1, 1, 64, D}, torch::kFloat64);
  x.index_put_({torch::indexing::Ellipsis, torch::indexing::Slice(0, D, 2)},
               1.0);  // each pair (1, 0): out = (cos, sin)
  const torch::Tensor pos = torch::linspace(0, 1000000, 64, torch::kFloat64).to(torch::kLong);
  const torch::Tensor fused = ops::rope({x.to(torch::kFloat32)}, pos, spec)[0].to(torch::kFloat64);
  const torch::Tensor exact = rope_reference(x, pos, f, config::RopePairing::interleaved, D);
  const double err = (fused - exact).abs().max().item<double>();
  EXPECT_LT(err, 2e-7) << "max error " << err;
  // And the shared math alone, pair by pair at the largest position.
  for (int64_t i = 0; i < D / 2; ++i) {
    float c, s;
    const double angle = ops::rope_angle(1000000, 1.0, f.inv_freq[i]);
    ops::rope_sincos(angle, &c, &s);
    EXPECT_NEAR(c, std::cos(angle), 2e-7);
    EXPECT_NEAR(s, std::sin(angle), 2e-7);
  }
}

TEST(RopeOp, SincosIsWithinTheBudgetOnADenseGridAndAtQuadrantEdges) {
  // rope_sincos (double angle -> float cos, sin) against the C library in double: 2e-7 on
  // 400k angles in [-1e6, 1e6] and on both sides of every multiple of pi/4 up to 2000 pi,
  // where the quadrant selection and the polynomials' end points are.
  double worst = 0, worst_angle = 0;
  auto check = [&](double angle) {
    float c, s;
    ops::rope_sincos(angle, &c, &s);
    const double err = std::max(std::fabs(c - std::cos(angle)), std::fabs(s - std::sin(angle)));
    if (err > worst) worst = err, worst_angle = angle;
  };
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 400000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    check((static_cast<double>(state >> 11) / 9007199254740992.0 * 2 - 1) * 1e6);
  }
  for (int j = -8000; j <= 8000; ++j)
    for (double eps : {-1e-9, 0.0, 1e-9}) check(j * 0.78539816339744830962 + eps);
  EXPECT_LT(worst, 2e-7) << "at angle " << worst_angle;
}

TEST(RopeOp, CosSinTableGivesTheSameBitsAsComputing) {
  // The table path (float32 rows from rope_table) against the kernel's own sincos: equal bits
  // for every float dtype, pairing, position mode and direction, including positions past the
  // table's rows (computed) and a scaled table (linear scaling folds into its angles).
  for (auto dtype : {torch::kFloat32, torch::kBFloat16, torch::kFloat16})
    for (bool interleaved : {true, false})
      for (int mode : {0, 1, 2})
        for (double scale : {1.0, 0.25}) {
          SCOPED_TRACE(std::string(c10::toString(dtype)) + (interleaved ? " interleaved" : " half") +
                       " mode=" + std::to_string(mode) + " scale=" + std::to_string(scale));
          const int64_t B = 2, S = 7, D = 16;
          RopeSpec spec;
          spec.inv_freq = torch::tensor(rope_frequencies(config::RopeConfig{}, D, S).inv_freq, torch::kFloat64);
          spec.position_scale = scale;
          spec.interleaved = interleaved;
          spec.layout = RopeLayout::bshd;
          spec.position_offsets = mode == 2;
          const torch::Tensor positions = mode == 0   ? torch::arange(S, torch::kLong) * 2
                                          : mode == 1 ? torch::arange(B * S, torch::kLong).view({B, S}) - 1
                                                      : torch::tensor({0L, 6L});
          torch::manual_seed(3);
          const torch::Tensor q = torch::randn({B, S, 3, D}).to(dtype).requires_grad_();
          const torch::Tensor k = torch::randn({B, S, 2, D}).to(dtype).requires_grad_();
          const auto computed = ops::rope({q, k}, positions, spec);
          (computed[0].to(torch::kFloat32).sin().sum() + computed[1].to(torch::kFloat32).cos().sum()).backward();
          const torch::Tensor gq = q.grad().clone(), gk = k.grad().clone();
          q.grad().zero_(), k.grad().zero_();
          spec.cos_sin = ops::rope_table(spec.inv_freq, scale, 9);  // rows 0..8: some positions fall outside
          const auto tabled = ops::rope({q, k}, positions, spec);
          (tabled[0].to(torch::kFloat32).sin().sum() + tabled[1].to(torch::kFloat32).cos().sum()).backward();
          EXPECT_TRUE(torch::equal(tabled[0], computed[0]));
          EXPECT_TRUE(torch::equal(tabled[1], computed[1]));
          EXPECT_TRUE(torch::equal(q.grad(), gq));
          EXPECT_TRUE(torch::equal(k.grad(), gk));
        }
}

TEST(RopeOp, KernelsReadTheTableWhereItCoversThePositionAndComputeElsewhere) {
  // A table of position scale 0 (cos 1, sin 0: the identity) over rows 0..3: tokens 0..3 come
  // out unrotated, tokens 4..6 are rotated by the computed angles. Fails if a kernel ignores
  // the table or reads it past its rows.
  for (auto dtype : {torch::kFloat32, torch::kBFloat16})
    for (bool interleaved : {true, false}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + (interleaved ? " interleaved" : " half"));
      RopeSpec spec;
      spec.inv_freq = torch::tensor(rope_frequencies(config::RopeConfig{}, 16, 7).inv_freq, torch::kFloat64);
      spec.interleaved = interleaved;
      spec.layout = RopeLayout::bshd;
      const torch::Tensor x = torch::randn({2, 7, 3, 16}).to(dtype), pos = torch::arange(7, torch::kLong);
      const torch::Tensor computed = ops::rope({x}, pos, spec)[0];
      spec.cos_sin = ops::rope_table(spec.inv_freq, 0.0, 4);
      const torch::Tensor tabled = ops::rope({x}, pos, spec)[0];
      EXPECT_TRUE(torch::equal(tabled.slice(1, 0, 4), x.slice(1, 0, 4)));
      EXPECT_TRUE(torch::equal(tabled.slice(1, 4, 7), computed.slice(1, 4, 7)));
      EXPECT_FALSE(torch::equal(computed.slice(1, 1, 4), x.slice(1, 1, 4)));
    }
}

TEST(RopeOp, CosSinTableRowsAreTheAnglesOfTheirPositions) {
  const int64_t D = 64, rows = 4096;
  const RopeFrequencies f = rope_frequencies(config::RopeConfig{}, D, rows);
  const torch::Tensor table = ops::rope_table(torch::tensor(f.inv_freq, torch::kFloat64), 0.5, rows);
  ASSERT_EQ(table.sizes(), (std::vector<int64_t>{rows, D}));
  const torch::Tensor angle =
      torch::arange(rows, torch::kFloat64).unsqueeze(1) * 0.5 * torch::tensor(f.inv_freq, torch::kFloat64).unsqueeze(0);
  EXPECT_LT((table.slice(1, 0, D / 2).to(torch::kFloat64) - angle.cos()).abs().max().item<double>(), 2e-7);
  EXPECT_LT((table.slice(1, D / 2, D).to(torch::kFloat64) - angle.sin()).abs().max().item<double>(), 2e-7);
}

TEST(RopeOp, BadArgumentsAreRefusedWithMessages) {
  RopeSpec spec;
  spec.inv_freq = torch::tensor(std::vector<double>{1.0, 0.5}, torch::kFloat64);
  const torch::Tensor x = torch::randn({1, 3, 2, 4});
  EXPECT_THROW(ops::rope({x.to(torch::kInt)}, torch::arange(2, torch::kLong), spec), c10::Error);
  EXPECT_THROW(ops::rope({x}, torch::arange(5, torch::kLong), spec), c10::Error);  // wrong S
  EXPECT_THROW(ops::rope({x}, torch::arange(2, torch::kInt), spec), c10::Error);   // int32 positions
  spec.rotary_dim = 3;
  EXPECT_THROW(ops::rope({x}, torch::arange(2, torch::kLong), spec), c10::Error);
  spec.rotary_dim = 0;
  spec.cos_sin = ops::rope_table(spec.inv_freq, 1.0, 4).to(torch::kFloat64);  // a table is float32
  EXPECT_THROW(ops::rope({x}, torch::arange(2, torch::kLong), spec), c10::Error);
  spec.cos_sin = ops::rope_table(spec.inv_freq.slice(0, 0, 1), 1.0, 4);  // rows of rotary_dim 2, not 4
  EXPECT_THROW(ops::rope({x}, torch::arange(2, torch::kLong), spec), c10::Error);
  spec.cos_sin = ops::rope_table(spec.inv_freq, 1.0, 4).t().contiguous().t();  // not contiguous
  EXPECT_THROW(ops::rope({x}, torch::arange(2, torch::kLong), spec), c10::Error);
  spec.cos_sin = torch::Tensor();
  EXPECT_THROW(ops::rope_({x.requires_grad_()}, torch::arange(2, torch::kLong), spec), c10::Error);
}

TEST(RopeOp, RegisteredWithTheDispatcher) {
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow("roformer::rope", "");
  auto typed = op.typed<std::vector<at::Tensor>(at::TensorList, const at::Tensor&, const at::Tensor&, double, double,
                                                bool, int64_t, bool, bool, const std::optional<at::Tensor>&)>();
  torch::Tensor q = torch::randn({2, 4, 3, 8}, torch::kFloat64).requires_grad_();
  const torch::Tensor inv = torch::tensor(rope_frequencies(config::RopeConfig{}, 8, 4).inv_freq, torch::kFloat64);
  const torch::Tensor pos = torch::arange(4, torch::kLong);
  const auto out = typed.call({q}, pos, inv, 1.0, 1.0, true, 0, true, false, std::nullopt);  // the Autograd kernel
  out[0].pow(2).sum().backward();
  EXPECT_LT((q.grad() - 2 * q).abs().max().item<double>(), 1e-12);  // rotation preserves the squared norm
  const RopeFrequencies f = rope_frequencies(config::RopeConfig{}, 8, 4);
  const torch::Tensor ref = rope_reference(q.detach().transpose(1, 2), pos, f, config::RopePairing::interleaved, 8);
  EXPECT_LT((out[0].detach().transpose(1, 2) - ref).abs().max().item<double>(), 1e-12);
  EXPECT_NO_THROW(c10::Dispatcher::singleton().findSchemaOrThrow("roformer::rope_", ""));
}

// Layout contract the training step relies on: outputs for BHSD views are BSHD in memory (the
// projection's layout), so transposing them back to [B, S, H, D] is free and the gradient reaches
// the q/k/v projection without a transposing copy; BSHD inputs give contiguous BSHD outputs.
TEST(RopeOp, OutputsAreBshdInMemoryWhateverTheLayout) {
  const RopeFrequencies f = rope_frequencies(config::RopeConfig{}, 8, 5);
  RopeSpec spec;
  spec.inv_freq = torch::tensor(f.inv_freq, torch::kFloat64);
  const torch::Tensor bshd = torch::randn({2, 5, 3, 8}, torch::kFloat64);
  const torch::Tensor pos = torch::arange(5, torch::kLong);
  spec.layout = ops::RopeLayout::bhsd;
  const torch::Tensor view = bshd.transpose(1, 2);  // [B, H, S, D] over BSHD memory
  const torch::Tensor out = ops::rope({view}, pos, spec)[0];
  EXPECT_EQ(out.sizes(), view.sizes());
  EXPECT_TRUE(out.transpose(1, 2).is_contiguous());
  spec.layout = ops::RopeLayout::bshd;
  const torch::Tensor same = ops::rope({bshd}, pos, spec)[0];
  EXPECT_TRUE(same.is_contiguous());
  EXPECT_TRUE(torch::equal(out.transpose(1, 2), same));  // one rotation, two layouts
}

}  // namespace rope_op_test
