// The projection form of the short-sequence attention op (ops::short_attention_qkv): bias, RoPE
// and attention applied from one [B, S, 3 H D] projection. Against the steps written out in
// double and differentiated by LibTorch's autograd: the bias added, q and k rotated by RoFormer's
// formula (Su et al. 2021, eq. 34: pairs (2i, 2i+1), or GPT-NeoX's halves, at angle
// position * scale * theta_i, times YaRN's magnitude), softmax(q k^T / sqrt(D) + causal mask) v;
// the output and the gradients of the projection and the bias, float32 and float64. Also: with
// neither bias nor rotation it is short_attention bit for bit; its tables against the rope op;
// thread-count independence; what it refuses.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "roformer/ops/rope/rope.h"
#include "roformer/ops/short_attention/short_attention.h"

namespace short_attention_qkv_test {

using namespace roformer;

namespace {

struct Case {
  int64_t B, H, S, D;
  bool causal, bias, rotate, interleaved;
  double magnitude = 1.0;
};

struct Rope {
  torch::Tensor inv_freq, positions;  // float64 [D / 2], int64 [S]
  double scale;
};

Rope rope_for(int64_t S, int64_t D) {
  Rope r;
  r.inv_freq = torch::pow(10000.0, -torch::arange(0, D, 2, torch::kFloat64) / static_cast<double>(D));
  r.positions = torch::arange(S, torch::kLong) * 3 + 2;  // not 0..S-1: the table follows the ids
  r.scale = 0.5;                                         // a linear (PI) factor of 2
  return r;
}

// RoFormer's rotation of x [B, H, S, D] (double), written out pair by pair.
torch::Tensor rotate(const torch::Tensor& x, const Rope& r, bool interleaved, double magnitude) {
  const int64_t D = x.size(-1), half = D / 2;
  const torch::Tensor angle = r.positions.to(torch::kFloat64).unsqueeze(1) * r.scale * r.inv_freq.unsqueeze(0);
  const torch::Tensor c = torch::cos(angle) * magnitude, s = torch::sin(angle) * magnitude;  // [S, D/2]
  const torch::Tensor a = interleaved ? x.slice(-1, 0, D, 2) : x.slice(-1, 0, half);
  const torch::Tensor b = interleaved ? x.slice(-1, 1, D, 2) : x.slice(-1, half, D);
  const torch::Tensor ya = a * c - b * s, yb = b * c + a * s;
  return interleaved ? torch::stack({ya, yb}, -1).flatten(-2) : torch::cat({ya, yb}, -1);
}

torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal) {
  torch::Tensor scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(q.size(-1)));
  if (causal) {
    const int64_t S = q.size(2);
    scores = scores.masked_fill(torch::ones({S, S}, torch::kBool).triu(1), -std::numeric_limits<double>::infinity());
  }
  return torch::matmul(torch::softmax(scores, -1), v);
}

struct Result {
  torch::Tensor out, grad_qkv, grad_bias;
};

// The op on (qkv, bias) in `dtype`, or with reference the steps above in double on the same values.
Result run(const Case& c, const torch::Tensor& qkv0, const torch::Tensor& bias0, const torch::Tensor& up,
           torch::ScalarType dtype, bool reference) {
  const torch::ScalarType t = reference ? torch::kFloat64 : dtype;
  torch::Tensor qkv = qkv0.to(t).clone().requires_grad_(true);
  torch::Tensor bias = c.bias ? bias0.to(t).clone().requires_grad_(true) : torch::Tensor();
  const Rope r = rope_for(c.S, c.D);
  torch::Tensor out;
  if (reference) {
    const torch::Tensor x = c.bias ? qkv + bias : qkv;
    std::vector<torch::Tensor> parts;
    for (const torch::Tensor& p : x.split(c.H * c.D, -1)) parts.push_back(p.view({c.B, c.S, c.H, c.D}).transpose(1, 2));
    if (c.rotate) {
      parts[0] = rotate(parts[0], r, c.interleaved, c.magnitude);
      parts[1] = rotate(parts[1], r, c.interleaved, c.magnitude);
    }
    out = attention(parts[0], parts[1], parts[2], c.causal);
  } else {
    torch::Tensor rotation;
    if (c.rotate)
      rotation = ops::short_attention_rotation(r.inv_freq, r.scale, c.magnitude, c.interleaved, r.positions, t);
    out = ops::short_attention_qkv(qkv, bias, c.H, c.causal, rotation, c.interleaved);
  }
  out.backward(up.to(t));
  return {out.detach(), qkv.grad(), c.bias ? bias.grad() : torch::Tensor()};
}

void expect_close(const torch::Tensor& got, const torch::Tensor& want, double tol, const std::string& what) {
  const torch::Tensor g = got.to(torch::kFloat64), e = want.to(torch::kFloat64);
  const double scale = std::max(1.0, e.abs().max().item<double>());
  const double err = (g - e).abs().max().item<double>();
  EXPECT_LE(err, tol * scale) << what << ": max error " << err << " (scale " << scale << ")";
}

std::string name(const Case& c, torch::ScalarType dtype) {
  return std::string(c10::toString(dtype)) + " B" + std::to_string(c.B) + " H" + std::to_string(c.H) + " S" +
         std::to_string(c.S) + " D" + std::to_string(c.D) + (c.causal ? " causal" : "") + (c.bias ? " bias" : "") +
         (c.rotate ? (c.interleaved ? " rope-interleaved" : " rope-half") : "") +
         (c.magnitude != 1.0 ? " magnitude" : "");
}

}  // namespace

TEST(ShortAttentionQkv, MatchesBiasRopeAndAttentionWrittenOutInDouble) {
  torch::manual_seed(5);
  const std::vector<Case> cases{
      {2, 3, 1, 8, false, true, true, true},          {2, 2, 5, 16, true, true, true, false},
      {1, 3, 37, 24, false, false, true, true},       {3, 2, 64, 32, true, true, false, true},
      {2, 2, 131, 64, false, true, true, false, 1.3}, {2, 4, 128, 32, true, true, true, true},
      {1, 2, 200, 40, true, true, true, false, 0.8},  {1, 2, 777, 16, true, true, true, true},
      {1, 1, 600, 24, false, true, true, false},  // past 512: blocks of query rows
  };
  for (const torch::ScalarType dtype : {torch::kFloat32, torch::kFloat64}) {
    const double tol = dtype == torch::kFloat64 ? 1e-11 : 3e-5;
    for (const Case& c : cases) {
      const torch::Tensor qkv = torch::randn({c.B, c.S, 3 * c.H * c.D}, torch::kFloat64).mul(2.0);
      const torch::Tensor bias = torch::randn({3 * c.H * c.D}, torch::kFloat64);
      const torch::Tensor up = torch::randn({c.B, c.H, c.S, c.D}, torch::kFloat64);
      const Result got = run(c, qkv, bias, up, dtype, false), want = run(c, qkv, bias, up, dtype, true);
      const std::string what = name(c, dtype);
      EXPECT_EQ(got.out.scalar_type(), dtype) << what;
      EXPECT_TRUE(got.out.transpose(1, 2).is_contiguous()) << what;  // [B, S, H, D] memory, as short_attention
      expect_close(got.out, want.out, tol, what + " out");
      expect_close(got.grad_qkv, want.grad_qkv, tol, what + " grad qkv");
      if (c.bias) expect_close(got.grad_bias, want.grad_bias, tol, what + " grad bias");
    }
  }
}

TEST(ShortAttentionQkv, WithoutBiasOrRotationIsShortAttentionBitForBit) {
  torch::manual_seed(9);
  const int64_t B = 2, H = 3, S = 45, D = 32;
  const torch::Tensor up = torch::randn({B, H, S, D});
  for (const bool causal : {false, true}) {
    torch::Tensor a = torch::randn({B, S, 3 * H * D}).requires_grad_(true);
    torch::Tensor b = a.detach().clone().requires_grad_(true);
    const torch::Tensor fused = ops::short_attention_qkv(a, {}, H, causal, {}, true);
    std::vector<torch::Tensor> parts;
    for (const torch::Tensor& p : b.split(H * D, -1)) parts.push_back(p.view({B, S, H, D}).transpose(1, 2));
    const torch::Tensor plain = ops::short_attention(parts[0], parts[1], parts[2], causal);
    fused.backward(up);
    plain.backward(up);
    EXPECT_TRUE(torch::equal(fused, plain)) << causal;
    EXPECT_TRUE(torch::equal(a.grad(), b.grad())) << causal;
  }
}

// The tables rotate as the rope op does: the op's rotation of a q tensor against ops::rope's.
TEST(ShortAttentionQkv, RotationTablesAgreeWithTheRopeOp) {
  torch::manual_seed(4);
  const int64_t S = 70, D = 32;
  const Rope r = rope_for(S, D);
  for (const bool interleaved : {true, false}) {
    ops::RopeSpec spec;
    spec.inv_freq = r.inv_freq;
    spec.position_scale = r.scale;
    spec.magnitude = 1.1;
    spec.interleaved = interleaved;
    const torch::Tensor x = torch::randn({2, 3, S, D});
    const torch::Tensor want = ops::rope({x}, r.positions, spec)[0];
    const torch::Tensor t =
        ops::short_attention_rotation(r.inv_freq, r.scale, 1.1, interleaved, r.positions, torch::kFloat);
    const torch::Tensor partner = interleaved ? x.view({2, 3, S, D / 2, 2}).flip(-1).view({2, 3, S, D})
                                              : torch::cat({x.slice(-1, D / 2), x.slice(-1, 0, D / 2)}, -1);
    expect_close(x * t[0] + partner * t[1], want, 1e-6, interleaved ? "interleaved" : "half");
  }
}

TEST(ShortAttentionQkv, ResultDoesNotDependOnTheThreadCount) {
  torch::manual_seed(12);
  const Case c{3, 5, 48, 32, true, true, true, true};
  const torch::Tensor qkv = torch::randn({c.B, c.S, 3 * c.H * c.D}, torch::kFloat64);
  const torch::Tensor bias = torch::randn({3 * c.H * c.D}, torch::kFloat64);
  const torch::Tensor up = torch::randn({c.B, c.H, c.S, c.D}, torch::kFloat64);
  const int threads = at::get_num_threads();
  std::vector<Result> results;
  for (const int n : {1, 2, 3}) {
    at::set_num_threads(n);
    results.push_back(run(c, qkv, bias, up, torch::kFloat32, false));
  }
  at::set_num_threads(threads);
  for (size_t i = 1; i < results.size(); ++i) {
    EXPECT_TRUE(torch::equal(results[i].out, results[0].out));
    EXPECT_TRUE(torch::equal(results[i].grad_qkv, results[0].grad_qkv));
    EXPECT_TRUE(torch::equal(results[i].grad_bias, results[0].grad_bias));
  }
}

TEST(ShortAttentionQkv, SaysWhatItTakesAndRefusesTheRest) {
  const torch::Tensor qkv = torch::randn({2, 16, 3 * 4 * 8});
  EXPECT_TRUE(ops::short_attention_qkv_supports(qkv, 4));
  EXPECT_FALSE(ops::short_attention_qkv_supports(qkv, 5));                                // 96 not 3 x 5 heads
  EXPECT_FALSE(ops::short_attention_qkv_supports(torch::randn({2, 16, 3 * 4 * 12}), 4));  // D = 12
  EXPECT_FALSE(ops::short_attention_qkv_supports(qkv.to(torch::kBFloat16), 4));
  EXPECT_FALSE(ops::short_attention_qkv_supports(torch::randn({1, ops::kShortAttentionMaxSeq + 1, 96}), 4));
  auto message = [&](const torch::Tensor& bias, const torch::Tensor& rotation) {
    try {
      ops::short_attention_qkv(qkv, bias, 4, false, rotation, true);
    } catch (const c10::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(torch::randn({95}), {}).find("bias must be [96]"), std::string::npos);
  EXPECT_NE(message({}, torch::randn({2, 15, 8})).find("rotation must be [2, 16, 8]"), std::string::npos);
  EXPECT_NE(message({}, torch::randn({2, 16, 8}, torch::kFloat64)).find("rotation must be"), std::string::npos);
}

}  // namespace short_attention_qkv_test
