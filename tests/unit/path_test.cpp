// PaTH through the attention module, against its definition transcribed with loops in double:
// flash-linear-attention's PaTHAttention makes w = l2norm(silu(conv3(w_proj(x)))) per head and
// beta = 2 sigmoid(bt_proj(x)); the score of query i and key j is q_i . (H_i ... H_{j+1} k_j)
// with H_t = I - beta_t w_t w_t^T, times 1/sqrt(d) (with FoX's c_i - c_j added before the scale
// for PaTH-FoX, as the authors' naive_path_attn does). Every block size gives the same output,
// all query rows at once and in blocks; a product one factor longer, reversed, or beta without
// its factor 2 must fail; the gradients are the definition's. Model-wide suites (causal leak, finite-difference
// gradients, parameter counts) run PaTH in model_test.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "attention_reference.h"
#include "roformer/model/attention_kernel.h"
#include "roformer/model/encoder.h"
#include "roformer/model/position/path.h"
#include "roformer/model/position/path_sweep.h"
#include "tiny_models.h"

namespace path_test {

using namespace roformer;
using namespace roformer::model;
using namespace attention_reference;
using config::PositionKind;

namespace {

using Matrix = std::vector<std::vector<double>>;

Matrix rows_of(const torch::Tensor& t) {  // [R, C] -> R rows
  const torch::Tensor c = t.contiguous().to(torch::kFloat64);
  Matrix m(c.size(0), std::vector<double>(c.size(1)));
  for (int64_t r = 0; r < c.size(0); ++r)
    for (int64_t k = 0; k < c.size(1); ++k) m[r][k] = c[r][k].item<double>();
  return m;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

double sigmoid(double z) {
  return 1.0 / (1.0 + std::exp(-z));
}

// The layer's w (per head and token, kD features), beta and FoX's c, computed with loops.
struct Transforms {
  std::vector<Matrix> w;  // [head][t][feature]
  Matrix beta, c;         // [head][t]
};

Transforms transforms(const Fixture& f, bool short_conv, bool gate) {
  auto& layer = *dynamic_cast<PathImpl&>(*f.position).layer[1]->as<PathLayerImpl>();
  const Matrix x = rows_of(f.x[0]);
  const Matrix down = rows_of(layer.w_proj[0]->as<torch::nn::Linear>()->weight);  // [rank, hidden]
  const Matrix up = rows_of(layer.w_proj[1]->as<torch::nn::Linear>()->weight);    // [hidden, rank]
  Matrix low(kS), full(kS, std::vector<double>(kHidden));
  for (int64_t t = 0; t < kS; ++t) {
    for (const auto& row : down) low[t].push_back(dot(row, x[t]));
    for (int64_t ch = 0; ch < kHidden; ++ch) full[t][ch] = dot(up[ch], low[t]);
  }
  if (short_conv) {  // causal depthwise: out_t = sum_m weight[m] in_{t - 2 + m}, then SiLU
    const torch::Tensor kernel = layer.w_conv1d->weight.squeeze(1);  // [hidden, 3]
    Matrix conv(kS, std::vector<double>(kHidden, 0.0));
    for (int64_t t = 0; t < kS; ++t)
      for (int64_t ch = 0; ch < kHidden; ++ch) {
        for (int64_t m = 0; m < 3; ++m)
          if (t - 2 + m >= 0) conv[t][ch] += kernel[ch][m].item<double>() * full[t - 2 + m][ch];
        conv[t][ch] *= sigmoid(conv[t][ch]);
      }
    full = conv;
  }
  Transforms out{std::vector<Matrix>(kHeads, Matrix(kS)), Matrix(kHeads, std::vector<double>(kS)),
                 Matrix(kHeads, std::vector<double>(kS, 0.0))};
  const Matrix bw = rows_of(layer.bt_proj->weight);
  for (int64_t h = 0; h < kHeads; ++h) {
    double running = 0;
    for (int64_t t = 0; t < kS; ++t) {
      std::vector<double> w(full[t].begin() + h * kD, full[t].begin() + (h + 1) * kD);
      const double norm = std::sqrt(dot(w, w) + 1e-6);
      for (double& e : w) e /= norm;
      out.w[h][t] = w;
      out.beta[h][t] = 2.0 * sigmoid(dot(bw[h], x[t]) + layer.bt_proj->bias[h].item<double>());
      if (gate) {
        running +=
            std::log(sigmoid(dot(rows_of(layer.g_proj->weight)[h], x[t]) + layer.g_proj->bias[h].item<double>()));
        out.c[h][t] = running;
      }
    }
  }
  return out;
}

std::vector<double> vec(const torch::Tensor& t) {
  return rows_of(t.unsqueeze(0))[0];
}

// q_i . (H_{ts[0]} H_{ts[1]} ... k_j): the factors applied to k_j last-listed first.
double reflected(const Transforms& tr, const Fixture& f, int64_t h, int64_t i, int64_t j,
                 const std::vector<int64_t>& ts, double beta_factor = 1.0) {
  std::vector<double> v = vec(f.k[h][j]);
  for (auto t = ts.rbegin(); t != ts.rend(); ++t) {
    const double amount = beta_factor * tr.beta[h][*t] * dot(tr.w[h][*t], v);
    for (int64_t e = 0; e < kD; ++e) v[e] -= amount * tr.w[h][*t][e];
  }
  return dot(vec(f.q[h][i]), v);
}

// H_i, H_{i-1}, ..., H_{j+1}: the authors' product, listed from the query side.
std::vector<int64_t> between(int64_t i, int64_t j) {
  std::vector<int64_t> ts;
  for (int64_t t = i; t > j; --t) ts.push_back(t);
  return ts;
}

config::ModelConfig path_config(int64_t block, bool short_conv, bool gate) {
  config::ModelConfig c = small_model(PositionKind::path, true);
  c.position.path.rank = 4;
  c.position.path.block = block;
  c.position.path.short_conv = short_conv;
  c.position.path.forget_gate = gate;
  return c;
}

// Random PaTH inputs in double: q, k, v [B, H, S, D], unit w and beta in [0, 2).
struct SweepInputs {
  torch::Tensor q, k, v;
  PathTransforms t;
  SweepInputs(int64_t B, int64_t H, int64_t S, int64_t D) {
    q = torch::randn({B, H, S, D}, kDouble), k = torch::randn({B, H, S, D}, kDouble);
    v = torch::randn({B, H, S, D}, kDouble);
    const torch::Tensor w = torch::randn({B, H, S, D}, kDouble);
    t = {w / w.norm(2, -1, true), 2.0 * torch::rand({B, H, S}, kDouble)};
  }
  // softmax(scale (token-by-token scores + gate_i - gate_j), causal) v; gate undefined: none.
  torch::Tensor attention(double scale, const torch::Tensor& gate = {}) const {
    const int64_t S = q.size(2);
    torch::Tensor s = path_scores(q, k, t, 0, S, 1);
    if (gate.defined()) s = s + gate.unsqueeze(-1) - gate.unsqueeze(-2);
    const torch::Tensor i = torch::arange(S).view({S, 1}), j = torch::arange(S).view({1, S});
    s = (s * scale).masked_fill(j > i, -std::numeric_limits<double>::infinity());
    return torch::matmul(torch::softmax(s, -1), v);
  }
};

}  // namespace

TEST(Path, EqualsTheAuthorsDefinitionForEveryBlockSize) {
  for (bool short_conv : {true, false})
    for (int64_t block : {1, 2, 3, 64}) {
      SCOPED_TRACE("block " + std::to_string(block) + (short_conv ? " with" : " without") + " the short convolution");
      Fixture f(path_config(block, short_conv, false));
      const Transforms tr = transforms(f, short_conv, false);
      const double scale = 1.0 / std::sqrt(double(kD));
      f.expect_output(true, f.expected(true, [&](int64_t h, int64_t i, int64_t j) {
        return reflected(tr, f, h, i, j, between(i, j)) * scale;
      }));
      if (block != 64) continue;
      // Mutations: one factor more (H_j too); the product reversed; beta without its factor 2.
      f.expect_output_differs(true, f.expected(true, [&](int64_t h, int64_t i, int64_t j) {
        return reflected(tr, f, h, i, j, between(i, j - 1 < 0 ? j : j - 1)) * scale;
      }));
      f.expect_output_differs(true, f.expected(true, [&](int64_t h, int64_t i, int64_t j) {
        std::vector<int64_t> ts = between(i, j);
        std::reverse(ts.begin(), ts.end());
        return reflected(tr, f, h, i, j, ts) * scale;
      }));
      f.expect_output_differs(true, f.expected(true, [&](int64_t h, int64_t i, int64_t j) {
        return reflected(tr, f, h, i, j, between(i, j), 0.5) * scale;
      }));
    }
}

TEST(Path, ForgetGateAddsFoxsDecayBeforeTheScale) {
  for (int64_t block : {2, 64}) {
    SCOPED_TRACE(block);
    Fixture f(path_config(block, true, true));
    const Transforms tr = transforms(f, true, true);
    const double scale = 1.0 / std::sqrt(double(kD));
    f.expect_output(true, f.expected(true, [&](int64_t h, int64_t i, int64_t j) {
      return (reflected(tr, f, h, i, j, between(i, j)) + tr.c[h][i] - tr.c[h][j]) * scale;
    }));
    f.expect_output_differs(true, f.expected(true, [&](int64_t h, int64_t i, int64_t j) {  // the gate unscaled
      return reflected(tr, f, h, i, j, between(i, j)) * scale + tr.c[h][i] - tr.c[h][j];
    }));
  }
}

// Blocked products equal the sweep token by token (block 1) at a length with many blocks.
TEST(Path, BlockedScoresEqualTokenByTokenOnes) {
  torch::manual_seed(5);
  const int64_t B = 2, H = 3, S = 45, D = 8;
  const torch::Tensor q = torch::randn({B, H, S, D}, kDouble), k = torch::randn({B, H, S, D}, kDouble);
  torch::Tensor w = torch::randn({B, H, S, D}, kDouble);
  w = w / w.norm(2, -1, true);
  const PathTransforms t{w, 2.0 * torch::rand({B, H, S}, kDouble)};
  const torch::Tensor want = path_scores(q, k, t, 0, S, 1);
  for (int64_t block : {4, 16, 64})
    for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, S}, {16, 32}, {5, 44}}) {
      const torch::Tensor got = path_scores(q, k, t, begin, end, block);
      EXPECT_TRUE(torch::allclose(got, want.narrow(2, begin, end - begin), 1e-10, 1e-10))
          << "block " << block << " rows " << begin << ".." << end;
    }
}

// Gradients of the blocked scores (the UT transform within blocks, the sweep's own backward across
// them) against autograd through the definition written token by token, in double.
TEST(Path, BlockedScoresDifferentiateAsTheDefinition) {
  torch::manual_seed(9);
  const int64_t B = 2, H = 2, S = 13, D = 4;
  auto leaf = [&](torch::Tensor t) { return t.requires_grad_(true); };
  const torch::Tensor q = leaf(torch::randn({B, H, S, D}, kDouble)), k = leaf(torch::randn({B, H, S, D}, kDouble));
  const torch::Tensor w_raw = leaf(torch::randn({B, H, S, D}, kDouble)),
                      beta = leaf(2.0 * torch::rand({B, H, S}, kDouble));
  const torch::Tensor weights = torch::randn({B, H, S, S}, kDouble);
  const torch::Tensor w = w_raw / w_raw.norm(2, -1, true);
  std::vector<torch::Tensor> rows;  // row i: q_i carried back key by key
  for (int64_t i = 0; i < S; ++i) {
    std::vector<torch::Tensor> row(S, torch::zeros({B, H}, kDouble));
    torch::Tensor v = q.select(2, i);
    row[i] = (v * k.select(2, i)).sum(-1);
    for (int64_t t = i; t > 0; --t) {
      const torch::Tensor wt = w.select(2, t);
      v = v - beta.select(2, t).unsqueeze(-1) * (v * wt).sum(-1, true) * wt;
      row[t - 1] = (v * k.select(2, t - 1)).sum(-1);
    }
    rows.push_back(torch::stack(row, -1));
  }
  const torch::Tensor want_scores = torch::stack(rows, 2);
  const std::vector<torch::Tensor> leaves{q, k, w_raw, beta};
  for (int64_t block : {1, 3, 4, 13})
    for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, S}, {5, 11}}) {
      SCOPED_TRACE("block " + std::to_string(block) + " rows " + std::to_string(begin) + ".." + std::to_string(end));
      const torch::Tensor part = weights.narrow(2, begin, end - begin);
      const auto want = torch::autograd::grad({(want_scores.narrow(2, begin, end - begin) * part).sum()}, leaves, {},
                                              /*retain_graph=*/true);
      const torch::Tensor got_scores = path_scores(q, k, PathTransforms{w, beta}, begin, end, block);
      const auto got = torch::autograd::grad({(got_scores * part).sum()}, leaves, {}, /*retain_graph=*/true);
      for (size_t i = 0; i < leaves.size(); ++i)
        EXPECT_TRUE(torch::allclose(got[i], want[i], 1e-10, 1e-10)) << "input " << i;
    }
}

// The CPU's block copies and the device-generic gather lay the blocks out alike, values and
// gradients, for every query block range.
TEST(Path, BlockRowsByCopyEqualThemByGather) {
  torch::manual_seed(11);
  const int64_t B = 2, BH = 6, b = 3, n = 5;
  for (auto [first, nq] : {std::pair<int64_t, int64_t>{0, 5}, {2, 3}, {4, 1}}) {
    int64_t total = 0;
    for (const PathSweepStep& s : path_sweep_steps(first, nq)) total += s.count;
    const torch::Tensor own = torch::randn({nq, BH, b, b}, kDouble).requires_grad_(true);
    const torch::Tensor earlier = torch::randn({total, BH, b, b}, kDouble).requires_grad_(true);
    const torch::Tensor weights = torch::randn({B, BH / B, nq * b, n * b}, kDouble);
    const torch::Tensor copied = path_rows(own, earlier, first, n, B),
                        gathered = path_rows_by_gather(own, earlier, first, n, B);
    EXPECT_TRUE(torch::equal(copied, gathered)) << "first " << first;
    const auto a = torch::autograd::grad({(copied * weights).sum()}, {own, earlier});
    const auto g = torch::autograd::grad({(gathered * weights).sum()}, {own, earlier});
    EXPECT_TRUE(torch::equal(a[0], g[0]) && torch::equal(a[1], g[1])) << "first " << first;
  }
}

// Evaluation by the sweep with an online softmax (path_attention_swept) is the softmax of the
// token-by-token scores (block 1), with and without FoX's gate, at block sizes that leave a
// partial last block, one block, or many.
TEST(Path, TheSweepWithAnOnlineSoftmaxIsTheSoftmaxOfTheScores) {
  torch::manual_seed(6);
  const SweepInputs in(2, 3, 45, 8);
  const torch::Tensor gate = torch::log_sigmoid(torch::randn({2, 3, 45}, kDouble) + 1).cumsum(-1);
  for (bool gated : {false, true}) {
    const torch::Tensor want = in.attention(0.3, gated ? gate : torch::Tensor());
    for (int64_t block : {1, 4, 16, 64}) {
      const torch::Tensor got =
          path_attention_swept(in.q, in.k, in.v, in.t, gated ? gate : torch::Tensor(), 0.3, block);
      EXPECT_TRUE(torch::allclose(got, want, 1e-10, 1e-10))
          << "block " << block << (gated ? " gated " : " ") << (got - want).abs().max();
    }
  }
}

// In float32 the sweep's blocks of 128 tokens (what evaluation takes) stay near the double
// softmax of the token-by-token scores over several blocks: the UT transform's solve and the rows'
// products do not lose precision with the longer block.
TEST(Path, TheSweepInFloatWithLongBlocksIsNearDouble) {
  torch::manual_seed(8);
  const SweepInputs in(1, 2, 300, 64);
  const torch::Tensor want = in.attention(0.125);
  auto f = [](const torch::Tensor& x) { return x.to(torch::kFloat32); };
  for (int64_t block : {32, 128}) {
    const torch::Tensor got =
        path_attention_swept(f(in.q), f(in.k), f(in.v), PathTransforms{f(in.t.w), f(in.t.beta)}, {}, 0.125, block);
    const double error = (got.to(kDouble) - want).abs().max().item<double>();
    EXPECT_LE(error, 1e-5) << "block " << block;  // 1.2e-6 at both
  }
}

// A PaTH model evaluates by the sweep where the CPU's tiles do not take the head dimension (12, as
// on a GPU, where no tile form exists), and equals its explicit scores (the reference kernel).
TEST(Path, EvaluationTakesTheSweepWhereNoTilesRun) {
  for (bool gate : {false, true}) {
    config::ModelConfig c = tiny_models::tiny_model(PositionKind::path, config::Objective::causal_lm);
    c.hidden_size = 24, c.num_heads = 2, c.position.path.block = 16, c.position.path.forget_gate = gate;
    auto run = [&](config::AttentionKernel kernel, std::string* ran) {
      c.attention_kernel = kernel;
      auto [m, ids] = tiny_models::double_model(c, 300);  // the sweep's blocks of 128: three
      m->eval();
      torch::NoGradGuard no_grad;
      AttentionKernelProbe probe;
      model::EncoderInput in;
      in.input_ids = ids;
      const torch::Tensor out = m->forward(in);
      *ran = probe.summary();
      return out;
    };
    std::string swept, explicit_ran;
    const torch::Tensor got = run(config::AttentionKernel::auto_, &swept);
    const torch::Tensor want = run(config::AttentionKernel::reference, &explicit_ran);
    EXPECT_NE(swept.find(attention_kernel::kTile), std::string::npos) << swept;
    EXPECT_EQ(explicit_ran.find(attention_kernel::kTile), std::string::npos) << explicit_ran;
    EXPECT_TRUE(torch::allclose(got, want, 1e-9, 1e-9)) << (got - want).abs().max();
  }
}

}  // namespace path_test
