// The methods of 2025 through the attention module, each against its authors' code transcribed
// with loops over heads, queries and keys in double, causal and (where defined) bidirectional,
// all query rows at once and in blocks; a transcription with one mutation must fail for each.
//   FoX: the forward of ForgettingAttentionLayer (zhixuan-lin/forgetting-transformer):
//        log_fgate = logsigmoid(fgate_proj(x)), c = cumsum, scores q.k/sqrt(d) + c_i - c_j; its
//        constant-gate ablation equals ALiBi with the same slopes; open gates equal RoPE.
//   Stick-breaking: sb_ref.stickbreaking (shawntan/stickbreaking-attention) with the authors'
//        models' `o + rem * v`, and without it (flash-linear-attention's layer).
//   SSMax (Nakanishi 2025): softmax(s log(n) z), n the keys a query sees.
//   QK-norm, the output gate, the output norm and the key/value shift of the FoX authors' Pro layer.
// Model-wide suites (causal leak, padding, gradients by finite differences, parameter counts)
// run these options too (model_test).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <vector>

#include "attention_reference.h"
#include "roformer/model/encoder.h"
#include "roformer/model/position/fox.h"
#include "roformer/model/position/relative_bias.h"

namespace attention_2025_test {

using namespace roformer;
using namespace roformer::model;
using namespace attention_reference;
using config::PositionKind;

namespace {

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

double content(const torch::Tensor& q, const torch::Tensor& k, int64_t h, int64_t i, int64_t j) {
  return dotd(q[h][i], k[h][j]) / std::sqrt(double(kD));
}

using Weights = std::function<std::vector<double>(int64_t h, int64_t i)>;  // a_i over keys 0..S-1

// Softmax over the allowed keys of score(h, i, j).
Weights softmax_of(bool causal, const std::function<double(int64_t, int64_t, int64_t)>& score) {
  return [=](int64_t h, int64_t i) {
    std::vector<double> a(kS, 0.0);
    double top = -1e300, z = 0;
    const int64_t last = causal ? i : kS - 1;
    for (int64_t j = 0; j <= last; ++j) top = std::max(top, score(h, i, j));
    for (int64_t j = 0; j <= last; ++j) z += (a[j] = std::exp(score(h, i, j) - top));
    for (double& w : a) w /= z;
    return a;
  };
}

// The heads' outputs sum_j a_ij v_j (+ own_value(h, i) v_i), merged to [1, S, hidden], before output.dense.
torch::Tensor context(const Fixture& f, const Weights& weights,
                      const std::function<double(int64_t, int64_t)>& own = {}) {
  torch::Tensor ctx = torch::zeros({kS, kHeads, kD}, kDouble);
  for (int64_t h = 0; h < kHeads; ++h)
    for (int64_t i = 0; i < kS; ++i) {
      const std::vector<double> a = weights(h, i);
      for (int64_t j = 0; j < kS; ++j) ctx[i][h] += a[j] * f.v[h][j];
      if (own) ctx[i][h] += own(h, i) * f.v[h][i];
    }
  return ctx.reshape({1, kS, kHidden});
}

torch::Tensor project(const Fixture& f, const torch::Tensor& ctx) {
  return torch::nn::functional::linear(ctx, f.attn->output->dense->weight, f.attn->output->dense->bias);
}

// ---- FoX ----

// c[h][t] = sum_{l <= t} log sigmoid(w_h . x_l + b_h), the authors' cumsum of logsigmoid(fgate_logit).
std::vector<std::vector<double>> fox_c(const Fixture& f) {
  auto& fox = dynamic_cast<FoxImpl&>(*f.position);
  const auto& gate = fox.layer[1]->as<FoxLayerImpl>()->fgate_proj;
  std::vector<std::vector<double>> c(kHeads, std::vector<double>(kS));
  for (int64_t h = 0; h < kHeads; ++h) {
    double acc = 0;
    for (int64_t t = 0; t < kS; ++t) {
      acc += std::log(sigmoid(dotd(gate->weight[h], f.x[0][t]) + gate->bias[h].item<double>()));
      c[h][t] = acc;
    }
  }
  return c;
}

config::ModelConfig fox_config(bool causal) {
  config::ModelConfig c = small_model(PositionKind::fox, causal);
  return c;
}

// Copies the attention weights and input of `from` into `to` (fixtures of different families
// draw them from different points of the generator).
void share_weights(const Fixture& from, Fixture& to) {
  torch::NoGradGuard no_grad;
  auto src = from.attn->named_parameters();
  for (auto& item : to.attn->named_parameters()) item.value().copy_(src[item.key()]);
  to.x = from.x.clone();
  to.q = from.q.clone();
  to.k = from.k.clone();
  to.v = from.v.clone();
}

}  // namespace

TEST(Fox, EqualsTheAuthorsLayerInDouble) {
  for (bool causal : {true, false}) {
    SCOPED_TRACE(causal ? "causal" : "bidirectional (ours: -|c_i - c_j|)");
    Fixture f(fox_config(causal));
    const auto c = fox_c(f);
    auto decay = [&](int64_t h, int64_t i, int64_t j) {
      return causal ? c[h][i] - c[h][j] : -std::abs(c[h][i] - c[h][j]);
    };
    const torch::Tensor want = project(f, context(f, softmax_of(causal, [&](int64_t h, int64_t i, int64_t j) {
                                                    return content(f.q, f.k, h, i, j) + decay(h, i, j);
                                                  })));
    f.expect_output(causal, want);
    f.attn->train();  // causal: the key bias -c_j folded into the keys (no dropout here)
    f.expect_output(causal, want);
    f.attn->eval();
    // Mutations: the sign of the decay; the gate of the key itself counted (sum from l = j).
    f.expect_output_differs(causal, project(f, context(f, softmax_of(causal, [&](int64_t h, int64_t i, int64_t j) {
                                                         return content(f.q, f.k, h, i, j) - decay(h, i, j);
                                                       }))));
    f.expect_output_differs(causal, project(f, context(f, softmax_of(causal, [&](int64_t h, int64_t i, int64_t j) {
                                                         const double own = j > 0 ? c[h][j] - c[h][j - 1] : c[h][0];
                                                         return content(f.q, f.k, h, i, j) + decay(h, i, j) + own;
                                                       }))));
  }
}

// In training, causal FoX folds -c_j into the keys (the softmax drops the row's c_i): a model's
// loss and every gradient equal those of the explicit scores (`reference`) in double, for the
// plain gate, with RoPE, in the Pro block and under right padding (the mask's rows then), at
// lengths the short kernel takes and one past it (SDPA), and on the rows a task's loss reads.
TEST(Fox, FoldedKeyBiasTrainsAsTheExplicitScores) {
  for (const int64_t S : {int64_t{37}, int64_t{131}, int64_t{600}}) {
    for (int variant = 0; variant < 3; ++variant) {
      config::ModelConfig c = small_model(PositionKind::fox, true);
      c.vocab_size = 29;
      c.hidden_dropout = 0;
      if (variant == 1) c.position.fox.rope = true;
      if (variant == 2) c.qk_norm = c.output_gate = c.output_norm = c.kv_shift = true;
      SCOPED_TRACE("S " + std::to_string(S) + ", variant " + std::to_string(variant));
      c.attention_kernel = config::AttentionKernel::reference;
      EncoderModel ref = build_model(c, 3);
      c.attention_kernel = config::AttentionKernel::auto_;
      EncoderModel folded = build_model(c, 3);
      torch::manual_seed(6);
      const torch::Tensor ids = torch::randint(0, 29, {2, S}, torch::kLong);
      torch::Tensor mask = torch::ones({2, S}, torch::kLong);
      mask.index_put_({1, torch::indexing::Slice(S - 5)}, 0);  // a right padding
      torch::Tensor targets = ids.masked_fill(mask == 0, -100);
      if (variant == 0) targets.narrow(1, 0, S - 3).fill_(-100);  // the last rows alone: rows_from
      for (EncoderModel* m : {&ref, &folded}) {
        (*m)->to(torch::kFloat64);
        (*m)->train();
      }
      const torch::Tensor lr = ref->loss({ids, mask}, targets), lf = folded->loss({ids, mask}, targets);
      lr.backward();
      lf.backward();
      EXPECT_NEAR(lf.item<double>(), lr.item<double>(), 1e-12);
      auto rp = ref->named_parameters();
      for (const auto& item : folded->named_parameters()) {
        if (!item.value().grad().defined()) continue;
        EXPECT_LT((item.value().grad() - rp[item.key()].grad()).abs().max().item<double>(), 1e-10) << item.key();
      }
    }
  }
}

// With one constant gate per head, f_h = exp(-m_h), the decay is -m_h (i - j): ALiBi with
// slopes m_h. The authors' bias initialisation b = -log(expm1(1 / t)) with t = 1 / m gives it.
// The authors' fgate_bias_init: decay times log-spaced over the heads from T_min to T_max, and
// the bias b = -log(expm1(1 / T)), so that T = -1 / log(sigmoid(b)); without decay times the
// bias-only gates start at 0 (f = 1/2).
TEST(Fox, DecayTimeInitialisationGivesEachHeadItsDecayTime) {
  config::ModelConfig c = small_model(PositionKind::fox, true);
  c.num_heads = 4;
  c.position.fox.gate = config::FoxGate::bias_only;
  for (bool decay : {true, false}) {
    c.position.fox.decay_time_min = decay ? 2.0 : 0.0;
    c.position.fox.decay_time_max = decay ? 2000.0 : 0.0;
    EncoderModel m = build_model(c, 1234);
    auto& fox = dynamic_cast<FoxImpl&>(*m->position);
    ASSERT_EQ(fox.layer->size(), 2u);
    for (const auto& l : *fox.layer) {
      const torch::Tensor b = l->as<FoxLayerImpl>()->fgate_bias.to(torch::kFloat64);
      for (int64_t h = 0; h < 4; ++h) {
        const double T = std::exp(std::log(2.0) + h * (std::log(2000.0) - std::log(2.0)) / 3);  // 2, 20, 200, 2000
        if (decay)
          EXPECT_NEAR(-1.0 / std::log(sigmoid(b[h].item<double>())), T, 1e-3 * T) << "head " << h;
        else
          EXPECT_EQ(b[h].item<double>(), 0.0);
      }
    }
  }
}

TEST(Fox, ConstantGatesAreAlibiWithTheSameSlopes) {
  for (bool causal : {true, false}) {
    SCOPED_TRACE(causal ? "causal" : "bidirectional");
    Fixture alibi(small_model(PositionKind::alibi, causal));
    config::ModelConfig c = fox_config(causal);
    c.position.fox.gate = config::FoxGate::bias_only;
    Fixture fox(c);
    share_weights(alibi, fox);
    const std::vector<double> m = alibi_slopes(kHeads);
    {
      torch::NoGradGuard no_grad;
      auto& bias = dynamic_cast<FoxImpl&>(*fox.position).layer[1]->as<FoxLayerImpl>()->fgate_bias;
      for (int64_t h = 0; h < kHeads; ++h) bias[h] = -std::log(std::expm1(m[h]));
    }
    const torch::Tensor want = alibi.run(causal);
    EXPECT_TRUE(torch::allclose(fox.run(causal), want, 1e-10, 1e-10));
    EXPECT_TRUE(torch::allclose(fox.run(causal, 3), want, 1e-10, 1e-10));
    {  // slopes one head off must not pass
      torch::NoGradGuard no_grad;
      auto& bias = dynamic_cast<FoxImpl&>(*fox.position).layer[1]->as<FoxLayerImpl>()->fgate_bias;
      bias[0] = -std::log(std::expm1(m[1]));
    }
    EXPECT_GT((fox.run(causal) - want).abs().max().item<double>(), 1e-6);
  }
}

// fox.rope with gates held open (log f = -4e-18) is RoPE.
TEST(Fox, OpenGatesWithRopeAreRope) {
  Fixture rope(small_model(PositionKind::rope, true));
  config::ModelConfig c = fox_config(true);
  c.position.fox.rope = true;
  Fixture fox(c);
  share_weights(rope, fox);
  {
    torch::NoGradGuard no_grad;
    auto& gate = dynamic_cast<FoxImpl&>(*fox.position).layer[1]->as<FoxLayerImpl>()->fgate_proj;
    gate->weight.zero_();
    gate->bias.fill_(40.0);
  }
  EXPECT_TRUE(torch::allclose(fox.run(true), rope.run(true), 1e-12, 1e-12));
}

// ---- stick-breaking ----

namespace {

// sb_ref.stickbreaking: A_ij = sigmoid(z_ij) prod_{j<k<i} (1 - sigmoid(z_ik)) for j < i
// (attend_current false); `current` also includes k = i and j = i (the mutation).
Weights stick_breaking_of(const std::function<double(int64_t, int64_t, int64_t)>& z, bool current = false) {
  return [=](int64_t h, int64_t i) {
    std::vector<double> a(kS, 0.0);
    const int64_t last = current ? i : i - 1;
    for (int64_t j = 0; j <= last; ++j) {
      double w = sigmoid(z(h, i, j));
      for (int64_t k = j + 1; k <= last; ++k) w *= 1.0 - sigmoid(z(h, i, k));
      a[j] = w;
    }
    return a;
  };
}

}  // namespace

TEST(StickBreaking, EqualsTheAuthorsReferenceInDouble) {
  for (PositionKind kind : {PositionKind::none, PositionKind::alibi}) {
    for (auto remainder : {config::StickBreakingRemainder::current, config::StickBreakingRemainder::discard}) {
      const bool keep = remainder == config::StickBreakingRemainder::current;
      SCOPED_TRACE(std::string(kind == PositionKind::none ? "none" : "alibi") + (keep ? " current" : " discard"));
      config::ModelConfig c = small_model(kind, true);
      c.attention_normalizer = config::AttentionNormalizer::stick_breaking;
      c.stick_breaking_remainder = remainder;
      Fixture f(c);
      const std::vector<double> m = kind == PositionKind::alibi ? alibi_slopes(kHeads) : std::vector<double>(kHeads);
      auto z = [&](int64_t h, int64_t i, int64_t j) { return content(f.q, f.k, h, i, j) - m[h] * double(i - j); };
      const Weights sb = stick_breaking_of(z);
      auto rem = [&](int64_t h, int64_t i) {  // 1 - sum_j A_ij, on the query's own value
        if (!keep) return 0.0;
        double total = 0;
        for (double w : sb(h, i)) total += w;
        return 1.0 - total;
      };
      f.expect_output(true, project(f, context(f, sb, rem)));
      // Mutations: the query attends to itself (attend_current); the remainder on the wrong value.
      f.expect_output_differs(true, project(f, context(f, stick_breaking_of(z, true), rem)));
      if (keep) f.expect_output_differs(true, project(f, context(f, sb, [&](int64_t h, int64_t i) { return 0.0; })));
    }
  }
}

// Its weights sum to at most 1 and the first query sees no key: with the remainder it returns
// its own value; the output stays finite where a softmax over no keys would not.
TEST(StickBreaking, FirstQueryKeepsItsOwnValue) {
  config::ModelConfig c = small_model(PositionKind::none, true);
  c.attention_normalizer = config::AttentionNormalizer::stick_breaking;
  Fixture f(c);
  const torch::Tensor out = f.run(true);
  ASSERT_TRUE(torch::isfinite(out).all().item<bool>());
  const torch::Tensor own = project(f, f.v.transpose(0, 1).reshape({1, kS, kHidden}));
  EXPECT_TRUE(torch::allclose(out[0][0], own[0][0], 1e-12, 1e-12));
}

// ---- SSMax, QK-norm, output gate ----

TEST(Ssmax, ScalesTheLogitsBySLogN) {
  for (bool causal : {true, false}) {
    SCOPED_TRACE(causal ? "causal" : "bidirectional");
    config::ModelConfig c = small_model(PositionKind::none, causal);
    c.attention_scale = config::AttentionScale::ssmax;
    Fixture f(c);
    {
      torch::NoGradGuard no_grad;
      f.attn->ssmax_scale.copy_(torch::tensor({0.7, -0.4}, kDouble));
    }
    const std::vector<double> s{0.7, -0.4};
    auto n = [&](int64_t i) { return causal ? double(i + 1) : double(kS); };
    f.expect_output(causal, project(f, context(f, softmax_of(causal, [&](int64_t h, int64_t i, int64_t j) {
                                                 return s[h] * std::log(n(i)) * content(f.q, f.k, h, i, j);
                                               }))));
    f.expect_output_differs(causal, project(f, context(f, softmax_of(causal, [&](int64_t h, int64_t i, int64_t j) {
                                                         return s[h] * std::log(n(i) + 1) * content(f.q, f.k, h, i, j);
                                                       }))));
  }
}

TEST(QkNorm, NormalisesEachHeadWithItsOwnWeights) {
  config::ModelConfig c = small_model(PositionKind::none, false);
  c.qk_norm = true;
  Fixture f(c);
  {
    torch::NoGradGuard no_grad;
    f.attn->q_norm->weight.normal_(1.0, 0.5);
    f.attn->k_norm->weight.normal_(1.0, 0.5);
  }
  // The authors' GroupNorm(num_groups=heads, is_rms_norm=True): x / sqrt(mean_head(x^2) + eps) * w,
  // with GroupNorm's default eps 1e-5 (their QK-norm passes none; norm_eps 1e-6 is the output norm's).
  auto rms = [&](const torch::Tensor& t, const torch::Tensor& w, bool per_head) {
    torch::Tensor out = torch::zeros_like(t);
    for (int64_t h = 0; h < kHeads; ++h)
      for (int64_t i = 0; i < kS; ++i) {
        double ms = 0;
        for (int64_t hh = 0; hh < kHeads; ++hh)
          if (!per_head || hh == h) ms += dotd(t[hh][i], t[hh][i]);
        ms /= per_head ? double(kD) : double(kD * kHeads);
        out[h][i] = t[h][i] / std::sqrt(ms + 1e-5) * w[h];
      }
    return out;
  };
  for (bool per_head : {true, false}) {
    const torch::Tensor qn = rms(f.q, f.attn->q_norm->weight.detach(), per_head);
    const torch::Tensor kn = rms(f.k, f.attn->k_norm->weight.detach(), per_head);
    const torch::Tensor want = project(
        f, context(f, softmax_of(false, [&](int64_t h, int64_t i, int64_t j) { return content(qn, kn, h, i, j); })));
    if (per_head)
      f.expect_output(false, want);
    else
      f.expect_output_differs(false, want);  // one norm over all heads is the mutation
  }
}

TEST(OutputGate, MultipliesTheHeadsBySigmoidOfTheInputProjection) {
  config::ModelConfig c = small_model(PositionKind::none, true);
  c.output_gate = true;
  Fixture f(c);
  const torch::Tensor ctx =
      context(f, softmax_of(true, [&](int64_t h, int64_t i, int64_t j) { return content(f.q, f.k, h, i, j); }));
  torch::Tensor gated = torch::zeros_like(ctx);
  const torch::Tensor w = f.attn->output_gate->weight.detach();
  for (int64_t t = 0; t < kS; ++t)
    for (int64_t o = 0; o < kHidden; ++o) gated[0][t][o] = ctx[0][t][o] * sigmoid(dotd(w[o], f.x[0][t]));
  f.expect_output(true, project(f, gated));
  f.expect_output_differs(true, project(f, ctx));  // the gate left out
}

// FoX's Pro block: ShiftLinear's key and value shift (token_shift: a_t t_(t-1) + (1 - a_t) t_t,
// a_t = sigmoid(shift_proj(x_t)) per head, zero before the first token), then attention, then
// FusedGroupNormGated (RMS per head with eps 1e-6 and a weight per feature, times sigmoid of the
// output gate), transcribed; shifting towards the current token instead, or gating before the
// norm, must fail.
TEST(ProBlock, ShiftsKeysAndValuesThenNormalisesAndGatesEachHead) {
  for (bool causal : {true, false}) {
    config::ModelConfig c = small_model(PositionKind::none, causal);
    c.output_gate = true;
    c.output_norm = true;
    c.kv_shift = true;
    Fixture f(c);
    {
      torch::NoGradGuard no_grad;
      f.attn->output_norm->weight.normal_(1.0, 0.5);
    }
    auto shift = [&](const torch::Tensor& t, const torch::nn::Linear& w, bool towards_previous) {
      torch::Tensor out = torch::zeros_like(t);
      for (int64_t h = 0; h < kHeads; ++h)
        for (int64_t i = 0; i < kS; ++i) {
          const double a = sigmoid(dotd(w->weight[h], f.x[0][i]));
          const torch::Tensor previous = i > 0 ? t[h][i - 1] : torch::zeros({kD}, kDouble);
          out[h][i] = towards_previous ? a * previous + (1 - a) * t[h][i] : (1 - a) * previous + a * t[h][i];
        }
      return out;
    };
    auto block = [&](bool towards_previous, bool norm_first) {
      const torch::Tensor k = shift(f.k, f.attn->key_shift, towards_previous);
      const torch::Tensor v = shift(f.v, f.attn->value_shift, towards_previous);
      const Weights a = softmax_of(causal, [&](int64_t h, int64_t i, int64_t j) { return content(f.q, k, h, i, j); });
      const torch::Tensor w_norm = f.attn->output_norm->weight.detach(), w_gate = f.attn->output_gate->weight.detach();
      torch::Tensor out = torch::zeros({1, kS, kHidden}, kDouble);
      for (int64_t h = 0; h < kHeads; ++h)
        for (int64_t i = 0; i < kS; ++i) {
          torch::Tensor o = torch::zeros({kD}, kDouble);
          const std::vector<double> ai = a(h, i);
          for (int64_t j = 0; j < kS; ++j) o += ai[j] * v[h][j];
          torch::Tensor gate = torch::zeros({kD}, kDouble);
          for (int64_t d = 0; d < kD; ++d) gate[d] = sigmoid(dotd(w_gate[h * kD + d], f.x[0][i]));
          if (!norm_first) o = o * gate;
          o = o / std::sqrt(dotd(o, o) / kD + 1e-6) * w_norm[h];
          if (norm_first) o = o * gate;
          out[0][i].slice(0, h * kD, (h + 1) * kD) = o;
        }
      return project(f, out);
    };
    f.expect_output(causal, block(true, true));
    f.expect_output_differs(causal, block(false, true));
    f.expect_output_differs(causal, block(true, false));
  }
}

}  // namespace attention_2025_test
