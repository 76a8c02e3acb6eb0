// The 2022-2024 extrapolation families (FIRE, KERPLE, Sandwich, CoPE), each through the
// attention module against its paper's formula (or its authors' released code) transcribed with
// loops over the query i and key j in double, causal and (where defined) bidirectional, all
// query rows at once and in blocks; a transcription with one mutation (a sign, an index, a
// clamp) must fail. Then the properties the papers rest on: FIRE's MLP inputs lie in [0, 1] at
// any length and position, KERPLE's bias never rises with distance, Sandwich's is 0 at offset 0
// and is the sinusoidal inner product, CoPE's positions are the counted gates.
// Model-wide suites (causal leak, padding, gradients, parameter counts) are in model_test.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "attention_reference.h"
#include "roformer/common/errors.h"
#include "roformer/config/config_loader.h"
#include "roformer/model/position/cope.h"
#include "roformer/model/position/fire.h"
#include "roformer/model/position/kerple_sandwich.h"

namespace frontier_position_test {

using namespace roformer;
using namespace roformer::model;
using namespace attention_reference;
using config::PositionKind;

namespace {

config::ModelConfig small(PositionKind kind, bool causal) {
  config::ModelConfig c = small_model(kind, causal);
  c.position.fire.mlp_width = 5;
  c.position.fire.l_init = 3;  // below the 7-token inputs, so the per-query normaliser matters
  c.position.fire.shared_layers = false;
  c.position.sandwich.dim = 6;
  c.position.cope.max_positions = 4;  // counts past 3 clamp within 7 tokens
  return c;
}

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// q_i.k_j / sqrt(d)
double content(const Fixture& f, int64_t h, int64_t i, int64_t j) {
  return dotd(f.q[h][i], f.k[h][j]) / std::sqrt(double(kD));
}

// ---- KERPLE ----

// r1, r2 drawn in their allowed ranges (the fixture's normal draw would be clamped).
void positive_kerple(Fixture& f) {
  torch::NoGradGuard no_grad;
  auto& kerple = dynamic_cast<KerpleImpl&>(*f.position);
  kerple.r1.copy_(torch::tensor({0.7, 1.6}, kDouble));
  kerple.r2.copy_(torch::tensor({0.3, 1.3}, kDouble));
}

}  // namespace

// Chi et al. 2022, Eqs. (log) -r1 log(1 + r2 |i - j|) and (power) -r1 |i - j|^r2, added to the
// scaled scores, r1 and r2 per head.
TEST(FrontierPosition, KerpleEqualsItsKernelsInDouble) {
  for (auto variant : {config::KerpleVariant::log, config::KerpleVariant::power}) {
    for (bool causal : {false, true}) {
      config::ModelConfig c = small(PositionKind::kerple, causal);
      c.position.kerple.variant = variant;
      Fixture f(c);
      positive_kerple(f);
      const auto& kerple = dynamic_cast<KerpleImpl&>(*f.position);
      const torch::Tensor r1 = kerple.r1.detach().clone(), r2 = kerple.r2.detach().clone();
      const bool log = variant == config::KerpleVariant::log;
      auto kernel = [&](int64_t h, int64_t i, int64_t j) {
        const double d = std::abs(double(i - j)), a = r1[h].item<double>(), b = r2[h].item<double>();
        return log ? -a * std::log(1.0 + b * d) : -a * std::pow(d, b);
      };
      SCOPED_TRACE(std::string(log ? "log" : "power") + (causal ? " causal" : " bidirectional"));
      f.expect_output(causal, f.expected(causal, [&](int64_t h, int64_t i, int64_t j) {
        return content(f, h, i, j) + kernel(h, i, j);
      }));
      // r1 and r2 swapped: a different kernel.
      f.expect_output_differs(causal, f.expected(causal, [&](int64_t h, int64_t i, int64_t j) {
        const double d = std::abs(double(i - j)), a = r2[h].item<double>(), b = r1[h].item<double>();
        return content(f, h, i, j) + (log ? -a * std::log(1.0 + b * d) : -a * std::pow(d, b));
      }));
    }
  }
}

// The authors' projection: values below 0.01 (and a power exponent above 2) are clamped in place
// before use, so the bias of any parameters is that of the clamped ones.
TEST(FrontierPosition, KerpleClampsItsParametersAsTheAuthorsCodeDoes) {
  for (auto variant : {config::KerpleVariant::log, config::KerpleVariant::power}) {
    config::ModelConfig c = small(PositionKind::kerple, false);
    c.position.kerple.variant = variant;
    KerpleImpl kerple(c.position.kerple, kHeads);
    {
      torch::NoGradGuard no_grad;
      kerple.r1.copy_(torch::tensor({-3.0f, 0.5f}));
      kerple.r2.copy_(torch::tensor({0.001f, 7.0f}));
    }
    const torch::Tensor bias = kerple.relative_bias(5, torch::kCPU);
    EXPECT_FLOAT_EQ(kerple.r1[0].item<float>(), 0.01f);
    EXPECT_FLOAT_EQ(kerple.r2[0].item<float>(), 0.01f);
    EXPECT_FLOAT_EQ(kerple.r2[1].item<float>(), variant == config::KerpleVariant::power ? 2.0f : 7.0f);
    EXPECT_TRUE(torch::isfinite(bias).all().item<bool>());
  }
}

// A kernel of distance: the bias never rises with |i - j| and is 0 at offset 0, for any
// parameters (random draws over wide ranges, both variants).
TEST(FrontierPosition, KerpleBiasIsMonotoneNonIncreasingInDistance) {
  torch::manual_seed(5);
  for (auto variant : {config::KerpleVariant::log, config::KerpleVariant::power}) {
    config::KerpleConfig kc;
    kc.variant = variant;
    for (int trial = 0; trial < 20; ++trial) {
      KerpleImpl kerple(kc, 3);
      kerple.to(torch::kFloat64);
      {
        torch::NoGradGuard no_grad;
        kerple.r1.copy_(torch::randn({3}) * 5);
        kerple.r2.copy_(torch::randn({3}) * 5);
      }
      const int64_t S = 300;
      const torch::Tensor bias = kerple.relative_bias(S, torch::kCPU).detach();  // [H, 2S - 1]
      const torch::Tensor right = bias.narrow(1, S - 1, S);                      // offsets 0..S-1
      EXPECT_TRUE((right.narrow(1, 1, S - 1) <= right.narrow(1, 0, S - 1)).all().item<bool>());
      EXPECT_TRUE(torch::allclose(bias, bias.flip(1), 1e-12, 1e-12));  // |i - j|: the same both ways
      EXPECT_TRUE((right.select(1, 0) == 0).all().item<bool>());
    }
  }
}

// ---- Sandwich ----

// Chi et al. 2023: b_h(i, j) = [sum_{k=1..d'/2} cos((i - j) / 10000^(2k/d')) - d'/2] / (8 h / H),
// heads h = 1..H (NeMo's SandwichRelativePositionEmbedding computes the same).
TEST(FrontierPosition, SandwichEqualsItsFormulaInDouble) {
  const int64_t dim = 6;
  auto sandwich = [&](int64_t h, int64_t i, int64_t j, int64_t k_first) {
    double sum = 0;
    for (int64_t k = k_first; k < k_first + dim / 2; ++k)
      sum += std::cos(double(i - j) / std::pow(10000.0, 2.0 * k / dim));
    return (sum - dim / 2.0) / (8.0 * double(h + 1) / double(kHeads));
  };
  for (bool causal : {false, true}) {
    Fixture f(small(PositionKind::sandwich, causal));
    f.expect_output(causal, f.expected(causal, [&](int64_t h, int64_t i, int64_t j) {
      return content(f, h, i, j) + sandwich(h, i, j, 1);
    }));
    // Frequencies from k = 0 (an index off by one): different.
    f.expect_output_differs(causal, f.expected(causal, [&](int64_t h, int64_t i, int64_t j) {
      return content(f, h, i, j) + sandwich(h, i, j, 0);
    }));
  }
}

// The bias is the inner product of sinusoidal position vectors p_t = [sin(t w_k), cos(t w_k)],
// w_k = 10000^(-2k/d'), k = 1..d'/2, shifted by -d'/2 (so 0 at offset 0, where p.p = d'/2) and
// divided by 8h/H; it is never positive.
TEST(FrontierPosition, SandwichIsTheShiftedSinusoidalInnerProduct) {
  const int64_t dim = 64, heads = 8;
  auto p = [&](int64_t t) {
    torch::Tensor v = torch::zeros({dim}, kDouble);
    for (int64_t k = 1; k <= dim / 2; ++k) {
      const double w = std::pow(10000.0, -2.0 * k / dim);
      v[2 * (k - 1)] = std::sin(double(t) * w);
      v[2 * (k - 1) + 1] = std::cos(double(t) * w);
    }
    return v;
  };
  const torch::Tensor offsets = torch::tensor({0, 1, -1, 5, 64, -300, 5000}, torch::kLong);
  const torch::Tensor bias = sandwich_bias(offsets, dim, heads);  // [H, 7]
  EXPECT_TRUE((bias.select(1, 0) == 0).all().item<bool>());
  EXPECT_TRUE((bias <= 1e-12).all().item<bool>());
  for (int64_t n = 0; n < offsets.size(0); ++n) {
    const int64_t i = 1000, j = i - offsets[n].item<int64_t>();
    const double inner = dotd(p(i), p(j)) - dim / 2.0;
    for (int64_t h = 0; h < heads; ++h)
      EXPECT_NEAR(bias[h][n].item<double>(), inner / (8.0 * double(h + 1) / double(heads)), 1e-9) << n << " " << h;
  }
}

// ---- FIRE ----

namespace {

// f(x) for head h written out: sum_w out[h][w] relu(hidden[w] x + hidden_bias[w]) + out_bias[h].
double mlp(FireMlpImpl& m, int64_t h, double x) {
  double y = m.out->bias[h].item<double>();
  for (int64_t w = 0; w < m.hidden->weight.size(0); ++w)
    y += m.out->weight[h][w].item<double>() *
         std::max(0.0, m.hidden->weight[w][0].item<double>() * x + m.hidden->bias[w].item<double>());
  return y;
}

}  // namespace

// Li et al. 2024, Eq. for FIRE: b(i, j) = f(psi(i - j) / psi(max(L, i))), psi(x) = log(|c x| + 1),
// L = |L_multiplier * l_init|, eps 1e-6 on the normaliser (the authors' code); per layer here
// (shared_layers false, so layer 1's FIRE is the one used). Bidirectional: keys after the query
// use the second MLP with normaliser psi(max(L, S - 1 - i)).
TEST(FrontierPosition, FireEqualsItsFormulaInDouble) {
  for (bool causal : {true, false}) {
    Fixture f(small(PositionKind::fire, causal));
    auto& fn = *f.position->named_modules()["layer.1"]->as<FireFunctionImpl>();
    const double c = fn.c.item<double>(), L = std::abs(fn.L_multiplier.item<double>() * 3.0);
    auto psi = [&](double x) { return std::log(std::abs(c * x) + 1.0); };
    auto fire = [&](int64_t h, int64_t i, int64_t j, bool mutate) {
      const double d = std::abs(double(i - j));
      if (j <= i || causal) return mlp(*fn.past, h, psi(d) / (psi(std::max(L, double(mutate ? j : i))) + 1e-6));
      return mlp(*fn.future, h, psi(d) / (psi(std::max(L, double(kS - 1 - i))) + 1e-6));
    };
    SCOPED_TRACE(causal ? "causal" : "bidirectional");
    f.expect_output(causal, f.expected(causal, [&](int64_t h, int64_t i, int64_t j) {
      return content(f, h, i, j) + fire(h, i, j, false);
    }));
    // Normalised by the key's position instead of the query's: different.
    f.expect_output_differs(causal, f.expected(causal, [&](int64_t h, int64_t i, int64_t j) {
      return content(f, h, i, j) + fire(h, i, j, true);
    }));
  }
}

// The MLP evaluated piecewise (by_head: each input's segment between the hidden units' kinks,
// one slope and intercept per head) against the MLP itself in double: values and the gradients
// of every weight and of the input, over inputs on both sides of every kink, with rising,
// falling and flat units (a flat unit with a positive and one with a negative bias).
TEST(FrontierPosition, FirePiecewiseMlpEqualsTheMlpInValuesAndGradients) {
  torch::manual_seed(5);
  FireMlpImpl a(8, 3), b(8, 3);
  a.to(torch::kFloat64);
  {
    torch::NoGradGuard no_grad;
    a.hidden->weight[2][0] = 0.0;
    a.hidden->bias[2] = 0.4;
    a.hidden->weight[5][0] = 0.0;
    a.hidden->bias[5] = -0.3;
    b.to(torch::kFloat64);
    for (const auto& p : a.named_parameters()) b.named_parameters()[p.key()].copy_(p.value());
  }
  const torch::Tensor kinks = (-a.hidden->bias / a.hidden->weight.squeeze(1)).detach();
  const torch::Tensor x0 =
      torch::cat({torch::linspace(-3, 3, 96, torch::kFloat64), kinks.masked_select(kinks.isfinite()) + 1e-3,
                  kinks.masked_select(kinks.isfinite()) - 1e-3})
          .view({-1, 2});
  const torch::Tensor xa = x0.clone().requires_grad_(true), xb = x0.clone().requires_grad_(true);
  const torch::Tensor want = a.forward(xa).permute({2, 0, 1});  // [H, N, 2]
  const torch::Tensor got = b.by_head(xb);
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_LE((got - want).abs().max().item<double>(), 1e-12);
  const torch::Tensor weights = torch::randn_like(want);
  (want * weights).sum().backward();
  (got * weights).sum().backward();
  EXPECT_LE((xa.grad() - xb.grad()).abs().max().item<double>(), 1e-12);
  for (const auto& p : a.named_parameters()) {
    SCOPED_TRACE(p.key());
    EXPECT_LE((p.value().grad() - b.named_parameters()[p.key()].grad()).abs().max().item<double>(), 1e-12);
  }
}

// Progressive interpolation: every input of the MLP lies in [0, 1] for the keys a query sees, at
// any length and position (rows at the start, middle and end of 50,000 tokens), for any c and L.
TEST(FrontierPosition, FireInputsLieInTheUnitIntervalAtAnyLength) {
  torch::manual_seed(8);
  for (bool bidirectional : {false, true}) {
    for (int64_t S : {int64_t{7}, int64_t{513}, int64_t{50000}}) {
      const torch::Tensor positions = torch::arange(S, torch::kLong);
      for (int trial = 0; trial < 4; ++trial) {
        const torch::Tensor c = torch::randn({}) * 2, L = (torch::randn({}) * 512).abs();
        for (int64_t begin : {int64_t{0}, S / 2, std::max<int64_t>(0, S - 4)}) {
          const int64_t end = std::min(S, begin + 4);
          const auto [past, future] = fire_inputs(positions, c, L, begin, end, bidirectional);
          const torch::Tensor key_after = positions.unsqueeze(0) > positions.narrow(0, begin, end - begin).unsqueeze(1);
          const torch::Tensor seen_past = past.masked_select(key_after.logical_not());
          EXPECT_GE(seen_past.min().item<double>(), 0.0);
          EXPECT_LE(seen_past.max().item<double>(), 1.0) << "S " << S << " rows " << begin;
          if (!bidirectional || !key_after.any().item<bool>()) continue;
          const torch::Tensor seen_future = future.masked_select(key_after);
          EXPECT_GE(seen_future.min().item<double>(), 0.0);
          EXPECT_LE(seen_future.max().item<double>(), 1.0) << "S " << S << " rows " << begin;
        }
      }
    }
  }
}

// ---- CoPE ----

// Golovneva et al. 2024 (the authors' projects/cope code): gates g_ij = sigmoid(s_ij) of the
// scaled scores, p_ij = min(sum_{t=j..i} g_it, npos - 1), z_ij = q_i.e[p_ij] interpolated
// between floor and ceil, added to the scores; layer 1's table e. Causal only.
TEST(FrontierPosition, CopeEqualsTheAuthorsAlgorithmInDouble) {
  Fixture f(small(PositionKind::cope, true));
  const torch::Tensor e = f.position->named_parameters()["layer.1.pos_emb"].detach();  // [D, npos]
  const int64_t npos = e.size(1);
  auto z = [&](int64_t h, int64_t i, double p) {
    const double lo = std::floor(p), w = p - lo;
    const double at_lo = dotd(f.q[h][i], e.select(1, int64_t(lo))),
                 at_hi = dotd(f.q[h][i], e.select(1, int64_t(std::ceil(p))));
    return at_hi * w + at_lo * (1 - w);
  };
  auto cope = [&](int64_t h, int64_t i, int64_t j, bool mutate) {
    double p = 0;
    for (int64_t t = mutate ? 0 : j; t <= (mutate ? j : i); ++t) p += sigmoid(content(f, h, i, t));
    return content(f, h, i, j) + z(h, i, std::min(p, double(npos - 1)));
  };
  f.expect_output(true, f.expected(true, [&](int64_t h, int64_t i, int64_t j) { return cope(h, i, j, false); }));
  // Gates counted from the sequence start to the key (a forward cumsum): different.
  f.expect_output_differs(true, f.expected(true, [&](int64_t h, int64_t i, int64_t j) { return cope(h, i, j, true); }));
}

// The positions are the gates counted from the key to the query, hidden keys counting nothing,
// and never beyond max_positions - 1.
TEST(FrontierPosition, CopePositionsAreTheCountedGates) {
  torch::manual_seed(4);
  const int64_t S = 9;
  torch::Tensor scores = torch::randn({2, 3, S, S}, kDouble) * 3;
  const torch::Tensor future = torch::ones({S, S}, torch::kBool).triu(1);
  scores = scores.masked_fill(future, -1e30);
  for (int64_t npos : {int64_t{3}, int64_t{100}}) {
    const torch::Tensor pos = cope_positions(scores, npos);
    for (int64_t i = 0; i < S; ++i)
      for (int64_t j = 0; j < S; ++j) {
        double count = 0;
        for (int64_t t = j; t <= i; ++t) count += sigmoid(scores[1][2][i][t].item<double>());
        EXPECT_NEAR(pos[1][2][i][j].item<double>(), std::min(count, double(npos - 1)), 1e-12) << i << "," << j;
      }
  }
}

// ---- Rows and refusals ----

// Attention at long lengths asks for the terms of a block of query rows: every block equals those
// rows of the whole term (FIRE from the positions, CoPE from the block's own scores).
TEST(FrontierPosition, TermsOfQueryRowsEqualThoseRowsOfTheWholeTerm) {
  for (auto [kind, causal] : {std::pair{PositionKind::fire, true}, std::pair{PositionKind::fire, false},
                              std::pair{PositionKind::cope, true}}) {
    SCOPED_TRACE(config::position_kind_names().name(kind) + (causal ? " causal" : " bidirectional"));
    Fixture f(small(kind, causal));
    torch::NoGradGuard no_grad;
    const torch::Tensor q = f.q.unsqueeze(0), k = f.k.unsqueeze(0);
    torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(kD));
    if (causal) scores = scores.masked_fill(torch::ones({kS, kS}, torch::kBool).triu(1), -1e30);
    for (const torch::Tensor& pos : {torch::arange(kS, torch::kLong), torch::tensor({{0, 1, 3, 4, 8, 9, 13}})}) {
      const torch::Tensor whole = f.position->score_term(q, k, scores, pos, 1, 0, kS, {});
      for (int64_t begin = 0; begin < kS; ++begin)
        for (int64_t end = begin + 1; end <= kS; ++end) {
          const torch::Tensor rows =
              f.position->score_term(q, k, scores.narrow(2, begin, end - begin), pos, 1, begin, end, {});
          ASSERT_TRUE(torch::allclose(rows, whole.narrow(2, begin, end - begin), 1e-12, 1e-12))
              << "positions " << pos.dim() << "-D, rows " << begin << ".." << end;
        }
    }
  }
}

TEST(FrontierPosition, RefusedCombinationsNameTheKeysAndTheReason) {
  auto load = [](const std::vector<std::string>& sets) {
    config::LoadedConfig loaded;
    config::apply_overrides(loaded, sets);
  };
  try {
    load({"model.position.kind=cope", "model.objective=mlm"});
    FAIL() << "CoPE with MLM was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("model.objective"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("causal"), std::string::npos) << e.what();
  }
  for (const std::string kind : {"fire", "kerple", "sandwich", "cope"}) {
    try {
      load({"model.position.kind=" + kind, "model.objective=causal_lm", "model.attention=linear"});
      FAIL() << kind << " with linear attention was accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("model.attention"), std::string::npos) << e.what();
    }
  }
  try {
    load({"model.position.kind=sandwich", "model.position.sandwich.dim=5"});
    FAIL() << "an odd Sandwich dimension was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("sandwich.dim"), std::string::npos) << e.what();
  }
}

// Settings that default to the data's length resolve to it, so a checkpoint records the number.
TEST(FrontierPosition, LengthDefaultsResolveToTheTrainingLength) {
  config::LoadedConfig loaded;
  config::apply_overrides(loaded, {"data.seq_len=96", "model.hidden_size=48", "model.num_heads=4"});
  EXPECT_EQ(loaded.config.model.position.fire.l_init, 96);
  EXPECT_EQ(loaded.config.model.position.cope.max_positions, 96);
  EXPECT_EQ(loaded.config.model.position.sandwich.dim, 12);
}

}  // namespace frontier_position_test
