// The relative families RoFormer is compared against (Shaw, Transformer-XL, DeBERTa) and its
// successor xPos, each against its paper's formula transcribed with explicit loops over the
// query i and key j in double, through the attention module (projections, the family's
// parameters of the right layer, softmax, output), with all queries at once and in blocks of
// query rows; their score terms depend only on the position differences, and a block's terms
// are those rows of the whole term; DeBERTa's buckets at hand-computed values; refusals with reasons.
// Gradients of every family's parameters are checked by finite differences in model_test.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "attention_reference.h"
#include "roformer/common/errors.h"
#include "roformer/config/config_loader.h"
#include "roformer/model/attention.h"
#include "roformer/model/position/relative_terms.h"
#include "roformer/model/position/xpos.h"

namespace relative_position_test {

using namespace roformer;
using namespace roformer::model;
using config::PositionKind;

using namespace attention_reference;

namespace {

config::ModelConfig small(PositionKind kind) {
  config::ModelConfig c = small_model(kind, /*causal=*/false);
  c.position.shaw.max_distance = 2;  // inputs of 7 tokens reach past the clip
  c.position.deberta.position_buckets = 4;
  c.position.deberta.max_relative_positions = 6;
  c.position.xpos.scale_base = 3;
  c.position.rope.rotary_dim = kD;
  return c;
}

}  // namespace

// Shaw et al. Eqs. 3-4: e_ij = q_i.(k_j + a^K_ij)/sqrt(d), z_i = sum_j a_ij (v_j + a^V_ij),
// a_ij = w_clip(j - i, k) (Eq. 5), one table per layer shared by the heads.
TEST(RelativePosition, ShawEqualsItsEquationsInDouble) {
  for (bool causal : {false, true}) {
    Fixture f(small(PositionKind::shaw));
    auto& tables = *f.position->named_modules()["layer.1"]->as<ShawTablesImpl>();
    const torch::Tensor wk = tables.relative_key->weight.detach(), wv = tables.relative_value->weight.detach();
    auto row = [](int64_t i, int64_t j) { return std::clamp<int64_t>(j - i, -2, 2) + 2; };
    const torch::Tensor want = f.expected(
        causal,
        [&](int64_t h, int64_t i, int64_t j) { return dotd(f.q[h][i], f.k[h][j] + wk[row(i, j)]) / std::sqrt(8.0); },
        [&](int64_t h, int64_t i, int64_t j) { return f.v[h][j] + wv[row(i, j)]; });
    f.expect_output(causal, want);
  }
}

// Transformer-XL's A^rel_ij = q_i.k_j + q_i.W_kr R_{i-j} + u.k_j + v.W_kr R_{i-j}, scaled by
// 1/sqrt(d), with R_t = [sin(t w_f), cos(t w_f)], w_f = 10000^(-2f/d_model).
TEST(RelativePosition, TransformerXlEqualsItsEquationInDouble) {
  for (bool causal : {false, true}) {
    Fixture f(small(PositionKind::transformer_xl));
    auto& l = *f.position->named_modules()["layer.1"]->as<XlLayerImpl>();
    const torch::Tensor w_kr = l.r_net->weight.detach(), u = l.r_w_bias.detach(), vb = l.r_r_bias.detach();
    auto R = [](int64_t t) {
      torch::Tensor r = torch::zeros({kHidden}, kDouble);
      for (int64_t fi = 0; fi < kHidden / 2; ++fi) {
        const double w = std::pow(10000.0, -2.0 * static_cast<double>(fi) / kHidden);
        r[fi] = std::sin(static_cast<double>(t) * w);
        r[fi + kHidden / 2] = std::cos(static_cast<double>(t) * w);
      }
      return r;
    };
    const torch::Tensor want = f.expected(
        causal,
        [&](int64_t h, int64_t i, int64_t j) {
          const torch::Tensor r = torch::mv(w_kr, R(i - j)).view({kHeads, kD})[h];  // head h of W_kr R_{i-j}
          return (dotd(f.q[h][i], f.k[h][j]) + dotd(f.q[h][i], r) + dotd(u[h], f.k[h][j]) + dotd(vb[h], r)) /
                 std::sqrt(8.0);
        },
        [&](int64_t h, int64_t, int64_t j) { return f.v[h][j]; });
    f.expect_output(causal, want);
  }
}

// DeBERTa-v2's log bucket, written out for one distance: exact within k/2 = mid, else
// sign * (mid + ceil(log(|d|/mid) / log((max-1)/mid) * (mid-1))).
int64_t bucket_of(int64_t d, int64_t k, int64_t max_pos) {
  const int64_t mid = k / 2;
  if (std::abs(d) <= mid) return d;
  const double steps =
      std::ceil(std::log(std::abs(d) / double(mid)) / std::log((max_pos - 1) / double(mid)) * (mid - 1));
  return (d > 0 ? 1 : -1) * (mid + static_cast<int64_t>(steps));
}

TEST(RelativePosition, DebertaBucketsAtHandComputedDistances) {
  // k = 32 (mid 16), max 512: log(17/16)/log(511/16)*15 = 0.26 -> 17; 100 -> 16 + ceil(7.94) = 24;
  // 511 -> 31 (the outermost bucket); 1000 -> 34 (clipped to row 2k-1 by the caller).
  const torch::Tensor d = torch::tensor({0, 5, -16, 17, 100, -100, 511, 1000}, torch::kLong);
  const torch::Tensor want = torch::tensor({0, 5, -16, 17, 24, -24, 31, 34}, torch::kLong);
  EXPECT_TRUE(torch::equal(deberta_bucket(d, 32, 512), want)) << deberta_bucket(d, 32, 512);
  for (int64_t x : {0, 1, 2, 3, 5, 7, 8, 40, -3, -9})
    EXPECT_EQ(deberta_bucket(torch::tensor({x}, torch::kLong), 4, 6).item<int64_t>(), bucket_of(x, 4, 6)) << x;
  EXPECT_TRUE(torch::equal(deberta_bucket(d, 32, 0), d));  // 0: no log buckets, the caller's clip only
}

// DeBERTa's Eq. 4 with Eq. 3's delta: (q_i.k_j + q_i.K^r_delta(i,j) + k_j.Q^r_delta(j,i)) / sqrt(3d),
// K^r = P W_k,r, Q^r = P W_q,r, delta(i, j) = clip(bucket(i - j) + k, 0, 2k - 1).
TEST(RelativePosition, DebertaEqualsItsEquationInDouble) {
  for (bool causal : {false, true}) {
    Fixture f(small(PositionKind::deberta));
    auto& deb = dynamic_cast<DebertaImpl&>(*f.position);
    auto& l = *f.position->named_modules()["layer.1"]->as<DebertaLayerImpl>();
    const torch::Tensor P = deb.rel_embeddings->weight.detach();
    const torch::Tensor kr = torch::nn::functional::linear(P, l.pos_key_proj->weight, l.pos_key_proj->bias).detach();
    const torch::Tensor qr =
        torch::nn::functional::linear(P, l.pos_query_proj->weight, l.pos_query_proj->bias).detach();
    auto delta = [](int64_t i, int64_t j) { return std::clamp<int64_t>(bucket_of(i - j, 4, 6) + 4, 0, 7); };
    auto head = [](const torch::Tensor& t, int64_t r, int64_t h) { return t[r].view({kHeads, kD})[h]; };
    const torch::Tensor want = f.expected(
        causal,
        [&](int64_t h, int64_t i, int64_t j) {
          return (dotd(f.q[h][i], f.k[h][j]) + dotd(f.q[h][i], head(kr, delta(i, j), h)) +
                  dotd(f.k[h][j], head(qr, delta(j, i), h))) /
                 std::sqrt(3.0 * 8.0);
        },
        [&](int64_t h, int64_t, int64_t j) { return f.v[h][j]; });
    f.expect_output(causal, want);
  }
}

// xPos: q~_m = R_m q_m * zeta^(m/B), k~_n = R_n k_n * zeta^(-n/B) per pair i, zeta_i =
// (2i/d + gamma)/(1 + gamma), written with uncentred positions: the module's centring must not
// change a score. Both pairings.
TEST(RelativePosition, XposEqualsItsEquationInDouble) {
  for (auto pairing : {config::RopePairing::interleaved, config::RopePairing::half})
    for (bool causal : {false, true}) {
      config::ModelConfig c = small(PositionKind::xpos);
      c.position.rope.pairing = pairing;
      Fixture f(c);
      auto transform = [&](const torch::Tensor& x, int64_t m, double sign) {
        torch::Tensor y = x.clone();
        for (int64_t i = 0; i < kD / 2; ++i) {
          const int64_t a = pairing == config::RopePairing::interleaved ? 2 * i : i;
          const int64_t b = pairing == config::RopePairing::interleaved ? 2 * i + 1 : i + kD / 2;
          const double theta = std::pow(10000.0, -2.0 * i / kD) * m;
          const double zeta = (2.0 * i / kD + 0.4) / 1.4, s = std::pow(zeta, sign * m / 3.0);
          const double x0 = x[a].item<double>(), x1 = x[b].item<double>();
          y[a] = (x0 * std::cos(theta) - x1 * std::sin(theta)) * s;
          y[b] = (x1 * std::cos(theta) + x0 * std::sin(theta)) * s;
        }
        return y;
      };
      const torch::Tensor want = f.expected(
          causal,
          [&](int64_t h, int64_t i, int64_t j) {
            return dotd(transform(f.q[h][i], i, 1.0), transform(f.k[h][j], j, -1.0)) / std::sqrt(8.0);
          },
          [&](int64_t h, int64_t, int64_t j) { return f.v[h][j]; });
      const torch::Tensor got = f.run(causal);
      EXPECT_TRUE(torch::allclose(got, want, 1e-10, 1e-10)) << (got - want).abs().max();
    }
}

// Every family's score contribution depends on positions only through their differences:
// explicit positions [B, S] shifted by a constant give the same term; other spacings do not.
TEST(RelativePosition, ScoreTermsDependOnlyOnPositionDifferences) {
  for (PositionKind kind :
       {PositionKind::shaw, PositionKind::transformer_xl, PositionKind::deberta, PositionKind::xpos}) {
    SCOPED_TRACE(config::position_kind_names().name(kind));
    Fixture f(small(kind));
    const torch::Tensor pos = torch::tensor({{0, 1, 3, 4, 8, 9, 13}}, torch::kLong);
    auto scores = [&](const torch::Tensor& p) {
      torch::NoGradGuard no_grad;
      torch::Tensor q = f.q.unsqueeze(0).clone(), k = f.k.unsqueeze(0).clone(), v = f.v.unsqueeze(0).clone();
      f.position->rotate(q, k, v, p);
      torch::Tensor s = torch::matmul(q, k.transpose(-2, -1)) * f.position->score_scale(kD);
      if (f.position->traits().forms_scores) s = s + f.position->score_term(q, k, {}, p, 1, 0, kS, {});
      return s;
    };
    const torch::Tensor base = scores(pos);
    EXPECT_TRUE(torch::allclose(base, scores(pos + 37), 1e-9, 1e-9)) << (base - scores(pos + 37)).abs().max();
    EXPECT_GT((base - scores(pos * 2)).abs().max().item<double>(), 1e-3);  // the differences do matter
  }
}

// Shaw's value term through positions [B, S] shifted: the same output term.
TEST(RelativePosition, ShawValueTermDependsOnlyOnDifferences) {
  Fixture f(small(PositionKind::shaw));
  const torch::Tensor probs = torch::softmax(torch::randn({1, kHeads, kS, kS}, kDouble), -1);
  const torch::Tensor pos = torch::tensor({{0, 2, 3, 6, 7, 8, 12}}, torch::kLong);
  torch::NoGradGuard no_grad;
  const torch::Tensor a = f.position->output_term(probs, pos, 0, 0), b = f.position->output_term(probs, pos + 5, 0, 0);
  EXPECT_TRUE(torch::allclose(a, b, 1e-12, 1e-12));
  EXPECT_FALSE(torch::allclose(a, f.position->output_term(probs, pos * 3, 0, 0), 1e-6, 1e-6));
}

// Attention at long lengths asks for the terms of a block of query rows: every block [begin, end)
// equals those rows of the whole term (score terms, and Shaw's value term from the rows' weights),
// for shared positions 0..S-1 (DeBERTa gathers them from a table by offset) and explicit ones
// [B, S]; and positions 0..S-1 give the same term either way.
TEST(RelativePosition, TermsOfQueryRowsEqualThoseRowsOfTheWholeTerm) {
  for (PositionKind kind : {PositionKind::shaw, PositionKind::transformer_xl, PositionKind::deberta}) {
    SCOPED_TRACE(config::position_kind_names().name(kind));
    Fixture f(small(kind));
    torch::NoGradGuard no_grad;
    const torch::Tensor q = f.q.unsqueeze(0), k = f.k.unsqueeze(0);
    const torch::Tensor probs = torch::softmax(torch::randn({1, kHeads, kS, kS}, kDouble), -1);
    const torch::Tensor shared = torch::arange(kS, torch::kLong);
    EXPECT_TRUE(torch::allclose(f.position->score_term(q, k, {}, shared, 1, 0, kS, {}),
                                f.position->score_term(q, k, {}, shared.unsqueeze(0), 1, 0, kS, {}), 1e-12, 1e-12));
    for (const torch::Tensor& pos : {shared, torch::tensor({{0, 1, 3, 4, 8, 9, 13}}, torch::kLong)}) {
      const torch::Tensor whole = f.position->score_term(q, k, {}, pos, 1, 0, kS, {});
      const torch::Tensor whole_out = f.position->output_term(probs, pos, 1, 0);
      ASSERT_EQ(whole_out.defined(), kind == PositionKind::shaw);
      for (int64_t begin = 0; begin < kS; ++begin)
        for (int64_t end = begin + 1; end <= kS; ++end) {
          const int64_t C = end - begin;
          const torch::Tensor rows = f.position->score_term(q, k, {}, pos, 1, begin, end, {});
          ASSERT_TRUE(torch::allclose(rows, whole.narrow(2, begin, C), 1e-12, 1e-12))
              << "positions " << pos.dim() << "-D, rows " << begin << ".." << end;
          if (!whole_out.defined()) continue;
          const torch::Tensor out = f.position->output_term(probs.narrow(2, begin, C), pos, 1, begin);
          ASSERT_TRUE(torch::allclose(out, whole_out.narrow(2, begin, C), 1e-12, 1e-12)) << begin << ".." << end;
        }
    }
  }
}

TEST(RelativePosition, SharedShawTablesAndKeysOnly) {
  config::ModelConfig c = small(PositionKind::shaw);
  c.position.shaw.per_layer = false;
  c.position.shaw.values = false;
  auto position = make_position_encoding(c);
  std::set<std::string> names;
  for (const auto& p : position->named_parameters()) names.insert(p.key());
  EXPECT_EQ(names, std::set<std::string>{"layer.0.relative_key.weight"});
  const torch::Tensor probs = torch::softmax(torch::randn({1, kHeads, kS, kS}), -1);
  EXPECT_FALSE(position->output_term(probs, torch::arange(kS), 1, 0).defined());
}

// Parameter names a reader can map to the papers and to Hugging Face's TransfoXL/DebertaV2.
TEST(RelativePosition, ParameterNames) {
  auto names_of = [](PositionKind kind) {
    std::set<std::string> names;
    for (const auto& p : make_position_encoding(small(kind))->named_parameters()) names.insert(p.key());
    return names;
  };
  EXPECT_EQ(names_of(PositionKind::shaw),
            (std::set<std::string>{"layer.0.relative_key.weight", "layer.0.relative_value.weight",
                                   "layer.1.relative_key.weight", "layer.1.relative_value.weight"}));
  EXPECT_TRUE(names_of(PositionKind::transformer_xl).count("layer.1.r_net.weight"));
  EXPECT_TRUE(names_of(PositionKind::transformer_xl).count("layer.0.r_w_bias"));
  EXPECT_TRUE(names_of(PositionKind::transformer_xl).count("layer.0.r_r_bias"));
  EXPECT_TRUE(names_of(PositionKind::deberta).count("rel_embeddings.weight"));
  EXPECT_TRUE(names_of(PositionKind::deberta).count("layer.1.pos_query_proj.bias"));
  EXPECT_TRUE(names_of(PositionKind::xpos).empty());
}

TEST(RelativePosition, LinearAttentionRefusesScoreTermFamiliesWithTheReason) {
  for (const char* kind : {"shaw", "transformer_xl", "deberta", "xpos"}) {
    try {
      config::load_overrides({"model.attention=linear", std::string("model.position.kind=") + kind});
      ADD_FAILURE() << kind << " was accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("kernelised numerator"), std::string::npos) << e.what();
    }
  }
}

}  // namespace relative_position_test
