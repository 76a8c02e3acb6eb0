// Linear attention against its definitions in double: the kernelised form (prefix sums for
// causal, one key-value summary for bidirectional) equals the quadratic reference written as
// RoFormer's Eq. 19 with explicit loops over m and n, for both feature maps and directions; the
// attention module's wiring (projections, features, RoPE on the features, output) equals the
// same transcription; RoPE's numerator depends only on m - n; gradients match finite
// differences; padded keys are ignored; FAVOR+ approximates the softmax kernel; score-bias
// families are refused with the reason; a model trains a step with each feature map.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "roformer/common/errors.h"
#include "roformer/config/config_loader.h"
#include "roformer/model/attention.h"
#include "roformer/model/encoder.h"
#include "roformer/model/linear_attention.h"
#include "roformer/model/position/position_encoding.h"

namespace linear_attention_test {

using namespace roformer;
using namespace roformer::model;

namespace {

const auto kDouble = torch::TensorOptions().dtype(torch::kFloat64);

// R_m x for one feature vector: interleaved pairs (x_2i, x_2i+1), theta_i = 10000^(-2i/F).
std::vector<double> rotate_pairs(const torch::Tensor& x, int64_t m) {
  const int64_t F = x.size(0);
  std::vector<double> out(static_cast<size_t>(F));
  auto a = x.accessor<double, 1>();
  for (int64_t i = 0; i < F / 2; ++i) {
    const double theta = std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(F));
    const double c = std::cos(static_cast<double>(m) * theta), s = std::sin(static_cast<double>(m) * theta);
    out[static_cast<size_t>(2 * i)] = a[2 * i] * c - a[2 * i + 1] * s;
    out[static_cast<size_t>(2 * i + 1)] = a[2 * i] * s + a[2 * i + 1] * c;
  }
  return out;
}

// Eq. 19, one (batch, head), as written: loops over m and n.
torch::Tensor eq19(const torch::Tensor& pq, const torch::Tensor& pk, const torch::Tensor& v, bool causal, bool rope,
                   const std::vector<int>& keep) {
  const int64_t S = pq.size(0), F = pq.size(1), D = v.size(1);
  torch::Tensor out = torch::zeros({S, D}, kDouble);
  for (int64_t m = 0; m < S; ++m) {
    const std::vector<double> rq =
        rope ? rotate_pairs(pq[m], m) : std::vector<double>(pq[m].data_ptr<double>(), pq[m].data_ptr<double>() + F);
    double den = 0;
    std::vector<double> num(static_cast<size_t>(D), 0.0);
    for (int64_t n = 0; n < S; ++n) {
      if ((causal && n > m) || !keep[static_cast<size_t>(n)]) continue;
      const torch::Tensor kn = pk[n].contiguous();
      const std::vector<double> rk =
          rope ? rotate_pairs(kn, n) : std::vector<double>(kn.data_ptr<double>(), kn.data_ptr<double>() + F);
      double score = 0, plain = 0;
      for (int64_t f = 0; f < F; ++f) {
        score += rq[static_cast<size_t>(f)] * rk[static_cast<size_t>(f)];
        plain += pq[m][f].item<double>() * kn[f].item<double>();
      }
      den += plain;
      for (int64_t d = 0; d < D; ++d) num[static_cast<size_t>(d)] += score * v[n][d].item<double>();
    }
    for (int64_t d = 0; d < D; ++d) out[m][d] = num[static_cast<size_t>(d)] / (den + 1e-6);
  }
  return out;
}

// The rotation through the model's own RoPE module (what attention uses), on [B, H, S, F].
torch::Tensor model_rope(const torch::Tensor& x) {
  config::ModelConfig c;
  c.hidden_size = x.size(-1) * 2;
  c.num_heads = 2;
  auto rope = make_position_encoding(c);
  torch::Tensor q = x, k = x.clone(), v = x.clone();
  rope->rotate(q, k, v, torch::arange(x.size(2), torch::kLong));
  return q;
}

}  // namespace

TEST(LinearAttention, EqualsEquation19InDoubleForBothMapsAndDirections) {
  torch::manual_seed(3);
  const int64_t B = 2, H = 2, S = 7, D = 8;
  const torch::Tensor q = torch::randn({B, H, S, D}, kDouble), k = torch::randn({B, H, S, D}, kDouble);
  const torch::Tensor v = torch::randn({B, H, S, D}, kDouble);
  const torch::Tensor projection = orthogonal_random_projection(D, D, 11).to(torch::kFloat64);
  for (bool favor : {false, true})
    for (bool causal : {false, true})
      for (bool rope : {false, true}) {
        const torch::Tensor pq = favor ? favor_features(q, projection, true) : elu1_features(q);
        const torch::Tensor pk = favor ? favor_features(k, projection, false) : elu1_features(k);
        const torch::Tensor rq = rope ? model_rope(pq) : pq, rk = rope ? model_rope(pk) : pk;
        const torch::Tensor out = linear_attention(pq, pk, rq, rk, v, causal, {});
        for (int64_t b = 0; b < B; ++b)
          for (int64_t h = 0; h < H; ++h) {
            const torch::Tensor ref = eq19(pq[b][h], pk[b][h], v[b][h], causal, rope, std::vector<int>(S, 1));
            EXPECT_TRUE(torch::allclose(out[b][h], ref, 1e-10, 1e-10))
                << "favor " << favor << " causal " << causal << " rope " << rope << "\n"
                << (out[b][h] - ref).abs().max();
          }
      }
}

// Causal attention runs in chunks of 64: across chunk boundaries and a ragged last chunk it is
// still Eq. 19.
TEST(LinearAttention, CausalChunksMatchEquation19PastOneChunk) {
  torch::manual_seed(9);
  const int64_t S = 150, D = 4;
  const torch::Tensor q = torch::randn({1, 1, S, D}, kDouble), k = torch::randn({1, 1, S, D}, kDouble);
  const torch::Tensor v = torch::randn({1, 1, S, D}, kDouble);
  const torch::Tensor pq = elu1_features(q), pk = elu1_features(k);
  const torch::Tensor out = linear_attention(pq, pk, model_rope(pq), model_rope(pk), v, true, {});
  const torch::Tensor ref = eq19(pq[0][0], pk[0][0], v[0][0], true, true, std::vector<int>(S, 1));
  EXPECT_TRUE(torch::allclose(out[0][0], ref, 1e-10, 1e-10)) << (out[0][0] - ref).abs().max();
}

TEST(LinearAttention, PaddedKeysAreIgnored) {
  torch::manual_seed(4);
  const int64_t S = 6, D = 4;
  const torch::Tensor q = torch::randn({1, 1, S, D}, kDouble), k = torch::randn({1, 1, S, D}, kDouble);
  const torch::Tensor v = torch::randn({1, 1, S, D}, kDouble);
  const std::vector<int> keep{1, 1, 0, 1, 0, 1};
  const torch::Tensor keep_t = torch::tensor(std::vector<int64_t>(keep.begin(), keep.end())).view({1, S});
  const torch::Tensor pq = elu1_features(q), pk = elu1_features(k);
  const torch::Tensor out = linear_attention(pq, pk, model_rope(pq), model_rope(pk), v, false, keep_t);
  EXPECT_TRUE(torch::allclose(out[0][0], eq19(pq[0][0], pk[0][0], v[0][0], false, true, keep), 1e-10, 1e-10));
}

// Eq. 19's numerator (R_m phi_q)^T (R_n phi_k) for fixed feature vectors depends only on m - n.
TEST(LinearAttention, RotatedNumeratorDependsOnlyOnTheOffset) {
  torch::manual_seed(5);
  const int64_t S = 12, F = 16;
  const torch::Tensor fq = elu1_features(torch::randn({F}, kDouble)), fk = elu1_features(torch::randn({F}, kDouble));
  const torch::Tensor rq = model_rope(fq.expand({1, 1, S, F}).contiguous())[0][0];
  const torch::Tensor rk = model_rope(fk.expand({1, 1, S, F}).contiguous())[0][0];
  const torch::Tensor scores = torch::matmul(rq, rk.t());  // [m, n]
  for (int64_t m = 0; m + 1 < S; ++m)
    for (int64_t n = 0; n + 1 < S; ++n)
      EXPECT_NEAR(scores[m][n].item<double>(), scores[m + 1][n + 1].item<double>(), 1e-12) << m << "," << n;
  EXPECT_GT((scores[0][0] - scores[0][5]).abs().item<double>(), 1e-3);  // and it does depend on the offset
}

TEST(LinearAttention, GradientsMatchFiniteDifferences) {
  torch::manual_seed(6);
  const int64_t S = 5, D = 4;
  for (bool causal : {false, true}) {
    torch::Tensor q = torch::randn({1, 2, S, D}, kDouble).requires_grad_(true);
    torch::Tensor k = torch::randn({1, 2, S, D}, kDouble).requires_grad_(true);
    torch::Tensor v = torch::randn({1, 2, S, D}, kDouble).requires_grad_(true);
    const torch::Tensor w = torch::randn({1, 2, S, D}, kDouble);
    auto f = [&] {
      const torch::Tensor pq = elu1_features(q), pk = elu1_features(k);
      return (linear_attention(pq, pk, model_rope(pq), model_rope(pk), v, causal, {}) * w).sum();
    };
    f().backward();
    for (torch::Tensor* t : {&q, &k, &v}) {
      const torch::Tensor grad = t->grad().clone();
      torch::NoGradGuard no_grad;
      for (int64_t i = 0; i < t->numel(); i += 3) {
        const double h = 1e-6, orig = t->view(-1)[i].item<double>();
        t->view(-1)[i] = orig + h;
        const double up = f().item<double>();
        t->view(-1)[i] = orig - h;
        const double down = f().item<double>();
        t->view(-1)[i] = orig;
        EXPECT_NEAR(grad.view(-1)[i].item<double>(), (up - down) / (2 * h), 1e-6) << "causal " << causal;
      }
    }
  }
}

// FAVOR+ features estimate the softmax kernel exp(q.k / sqrt(D)) (Choromanski et al., Lemma 1).
TEST(LinearAttention, FavorFeaturesApproximateTheSoftmaxKernel) {
  torch::manual_seed(7);
  const int64_t D = 16, m = 16 * 256;
  const torch::Tensor projection = orthogonal_random_projection(m, D, 21).to(torch::kFloat64);
  const torch::Tensor q = 0.5 * torch::randn({8, D}, kDouble), k = 0.5 * torch::randn({8, D}, kDouble);
  // Unstabilised features: the estimate itself (the stabilisers are constants that cancel).
  auto phi = [&](const torch::Tensor& x) {
    const torch::Tensor xs = x / std::pow(static_cast<double>(D), 0.25);
    return torch::exp(torch::matmul(xs, projection.t()) - 0.5 * xs.pow(2).sum(-1, true)) / std::sqrt(double(m));
  };
  const torch::Tensor estimate = torch::matmul(phi(q), phi(k).t());
  const torch::Tensor exact = torch::exp(torch::matmul(q, k.t()) / std::sqrt(static_cast<double>(D)));
  const torch::Tensor rel = (estimate - exact).abs() / exact;
  EXPECT_LT(rel.mean().item<double>(), 0.05) << rel;  // an unbiased estimate with m = 4096 features
  EXPECT_LT(rel.max().item<double>(), 0.3) << rel;
  // Unbiased: the mean over many independent draws converges on the kernel.
  torch::Tensor sum = torch::zeros_like(exact);
  for (uint64_t seed = 100; seed < 116; ++seed) {
    const torch::Tensor p = orthogonal_random_projection(m, D, seed).to(torch::kFloat64);
    auto phi_p = [&](const torch::Tensor& x) {
      const torch::Tensor xs = x / std::pow(static_cast<double>(D), 0.25);
      return torch::exp(torch::matmul(xs, p.t()) - 0.5 * xs.pow(2).sum(-1, true)) / std::sqrt(double(m));
    };
    sum += torch::matmul(phi_p(q), phi_p(k).t());
  }
  EXPECT_LT(((sum / 16 - exact).abs() / exact).mean().item<double>(), 0.02);
  // The stabilised features give the same attention weights (row-normalised).
  const torch::Tensor a = favor_features(q, projection, true), b = favor_features(k, projection, false);
  const torch::Tensor stab = torch::matmul(a, b.t());
  EXPECT_TRUE(torch::allclose(stab / stab.sum(1, true), estimate / estimate.sum(1, true), 1e-4, 1e-4));
}

// The attention module with model.attention=linear is Eq. 19 on its own projections: features
// of q and k rotated by RoPE in the numerator, the plain features in the normaliser.
TEST(LinearAttention, AttentionModuleWiresEquation19) {
  for (auto map : {config::FeatureMap::elu1, config::FeatureMap::favor}) {
    config::ModelConfig c;
    c.hidden_size = 16;
    c.num_heads = 2;
    c.attention = config::AttentionKind::linear;
    c.linear_attention.feature_map = map;
    c.attention_dropout = 0;
    torch::manual_seed(8);
    Attention attn(c, make_position_encoding(c));
    attn->to(torch::kFloat64);
    attn->eval();
    const int64_t S = 6, D = 8;
    const torch::Tensor x = torch::randn({1, S, 16}, kDouble);
    AttentionContext ctx;
    ctx.positions = torch::arange(S, torch::kLong);
    ctx.causal = true;
    const torch::Tensor got = attn->attend(x, ctx);
    auto proj = [&](const torch::nn::Linear& l) {
      return torch::nn::functional::linear(x, l->weight, l->bias).view({S, 2, D}).transpose(0, 1);  // [H, S, D]
    };
    const torch::Tensor q = proj(attn->self->query), k = proj(attn->self->key), v = proj(attn->self->value);
    // Features of all heads at once, as the module computes them (one key stabiliser for all).
    const bool favor = map == config::FeatureMap::favor;
    const torch::Tensor pq = favor ? favor_features(q, attn->favor_projection, true) : elu1_features(q);
    const torch::Tensor pk = favor ? favor_features(k, attn->favor_projection, false) : elu1_features(k);
    std::vector<torch::Tensor> heads;
    for (int64_t h = 0; h < 2; ++h) heads.push_back(eq19(pq[h], pk[h], v[h], true, true, std::vector<int>(S, 1)));
    const torch::Tensor ctx_out = torch::stack(heads, 1).reshape({1, S, 16});  // [S, H, D] -> [1, S, H*D]
    const torch::Tensor want =
        torch::nn::functional::linear(ctx_out, attn->output->dense->weight, attn->output->dense->bias);
    EXPECT_TRUE(torch::allclose(got, want, 1e-9, 1e-9)) << (got - want).abs().max();
  }
}

TEST(LinearAttention, ScoreBiasFamiliesAreRefusedWithTheReason) {
  for (const char* kind : {"t5_bias", "alibi"}) {
    try {
      config::load_overrides({"model.attention=linear", std::string("model.position.kind=") + kind});
      ADD_FAILURE() << kind << " was accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("has no place in its kernelised numerator"), std::string::npos) << e.what();
    }
  }
  for (const char* kind : {"rope", "sinusoidal", "learned", "none"})
    EXPECT_NO_THROW(config::load_overrides({"model.attention=linear", std::string("model.position.kind=") + kind}));
}

TEST(LinearAttention, ModelsTrainAStepWithEitherMapAndFavorRedraws) {
  for (auto map : {config::FeatureMap::elu1, config::FeatureMap::favor}) {
    config::ModelConfig c;
    c.objective = config::Objective::causal_lm;
    c.hidden_size = 16;
    c.num_heads = 2;
    c.num_layers = 2;
    c.ffn_size = 32;
    c.attention = config::AttentionKind::linear;
    c.linear_attention.feature_map = map;
    c.linear_attention.redraw_interval = 2;
    EncoderModel m = build_model(c, 1);
    m->train();
    const torch::Tensor ids = torch::randint(0, c.vocab_size, {2, 9}, torch::kLong);
    torch::Tensor before;
    if (map == config::FeatureMap::favor)
      before = m->encoder->layer[0]->as<EncoderLayer>()->attention->favor_projection.clone();
    for (int step = 0; step < 3; ++step) {
      const torch::Tensor loss = m->loss({ids}, ids, false, {}, {});
      EXPECT_TRUE(std::isfinite(loss.item<double>()));
      loss.backward();
    }
    for (const auto& p : m->parameters())
      EXPECT_TRUE(p.grad().defined() && torch::isfinite(p.grad()).all().item<bool>());
    if (map == config::FeatureMap::favor) {
      auto& attn = m->encoder->layer[0]->as<EncoderLayer>()->attention;
      EXPECT_EQ(attn->favor_forwards.item<int64_t>(), 3);
      EXPECT_FALSE(torch::equal(before, attn->favor_projection));  // redrawn at the second forward
      // Two models from one seed draw the same features (checkpoints carry them as buffers).
      EXPECT_TRUE(
          torch::equal(before, build_model(c, 1)->encoder->layer[0]->as<EncoderLayer>()->attention->favor_projection));
    }
  }
}

}  // namespace linear_attention_test
