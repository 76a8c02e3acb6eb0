// Encoder model tests for every position family: causal attention leaks nothing from the
// future, padding does not influence real tokens, gradients match finite differences in
// double, parameter counts match the closed form, and the quickstart configs run.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <map>

#include "model_cases.h"
#include "roformer/common/errors.h"
#include "roformer/config/config_loader.h"
#include "roformer/config/layer_layout.h"
#include "roformer/config/position_families.h"
#include "roformer/model/encoder.h"
#include "roformer/runtime/memory_estimate.h"
#include "test_support.h"

namespace model_test {

using namespace roformer;
using namespace roformer::model;
using config::PositionKind;
using namespace model_cases;

TEST(Model, CausalAttentionLeaksNothingFromTheFuture) {
  for (const Case& kase : all_cases()) {
    SCOPED_TRACE(kase.name);
    EncoderModel m = build_double(tiny(kase, config::Objective::causal_lm));
    torch::NoGradGuard no_grad;
    const torch::Tensor ids = torch::randint(0, 11, {2, 10}, torch::kLong);
    const torch::Tensor out = m->forward({ids});
    for (int64_t t = 0; t + 1 < 10; t += 3) {
      torch::Tensor changed = ids.clone();
      changed.index_put_({torch::indexing::Slice(), torch::indexing::Slice(t + 1)},
                         (ids.index({torch::indexing::Slice(), torch::indexing::Slice(t + 1)}) + 1) % 11);
      const torch::Tensor out2 = m->forward({changed});
      const auto past = torch::indexing::Slice(0, t + 1);
      EXPECT_LT((out.index({torch::indexing::Slice(), past}) - out2.index({torch::indexing::Slice(), past}))
                    .abs()
                    .max()
                    .item<double>(),
                1e-12)
          << "t=" << t;
      EXPECT_GT((out - out2).abs().max().item<double>(), 1e-6);  // the future did change
    }
  }
}

TEST(Model, PaddingDoesNotInfluenceRealTokens) {
  for (const Case& kase : all_cases()) {
    if (!defined_for(tiny(kase, config::Objective::mlm))) continue;
    SCOPED_TRACE(kase.name);
    EncoderModel m = build_double(tiny(kase, config::Objective::mlm));
    torch::NoGradGuard no_grad;
    const torch::Tensor ids = torch::randint(0, 11, {2, 9}, torch::kLong);
    torch::Tensor mask = torch::ones({2, 9}, torch::kLong);
    mask.index_put_({0, torch::indexing::Slice(6)}, 0);  // sequence 0 has 6 real tokens
    mask.index_put_({1, torch::indexing::Slice(4)}, 0);  // sequence 1 has 4
    torch::Tensor other_pads = ids.clone();
    other_pads.masked_fill_(mask == 0, 3);
    const torch::Tensor a = m->forward({ids, mask}), b = m->forward({other_pads, mask});
    EXPECT_LT((a[0].narrow(0, 0, 6) - b[0].narrow(0, 0, 6)).abs().max().item<double>(), 1e-12);
    EXPECT_LT((a[1].narrow(0, 0, 4) - b[1].narrow(0, 0, 4)).abs().max().item<double>(), 1e-12);
    // Without the mask the pads would be attended to.
    EXPECT_GT((m->forward({ids})[0].narrow(0, 0, 6) - a[0].narrow(0, 0, 6)).abs().max().item<double>(), 1e-6);
  }
}

TEST(Model, GradientsMatchFiniteDifferencesInDouble) {
  for (config::Objective objective : {config::Objective::mlm, config::Objective::causal_lm}) {
    for (const Case& kase : all_cases()) {
      if (!defined_for(tiny(kase, objective))) continue;
      SCOPED_TRACE(kase.name + (objective == config::Objective::mlm ? " mlm" : " causal"));
      config::ModelConfig c = tiny(kase, objective);
      EncoderModel m = build_double(c, 11);
      torch::manual_seed(3);
      const torch::Tensor ids = torch::randint(0, 11, {2, 6}, torch::kLong);
      torch::Tensor targets = torch::randint(0, 11, {2, 6}, torch::kLong);
      targets.index_put_({0, 1}, -100);  // an ignored position
      auto loss = [&] { return m->loss({ids}, targets); };
      m->zero_grad();
      loss().backward();
      torch::manual_seed(4);
      int checked = 0;
      for (auto& item : m->named_parameters()) {
        torch::Tensor p = item.value();
        const torch::Tensor flat = p.view({-1});
        for (int trial = 0; trial < 2; ++trial) {
          const int64_t idx = torch::randint(0, flat.numel(), {1}).item<int64_t>();
          const double eps = 1e-6;
          double plus = 0, minus = 0;
          {
            torch::NoGradGuard no_grad;
            const double orig = flat[idx].item<double>();
            flat[idx] = orig + eps;
            plus = loss().item<double>();
            flat[idx] = orig - eps;
            minus = loss().item<double>();
            flat[idx] = orig;
          }
          const double fd = (plus - minus) / (2 * eps);
          const double ad = p.grad().view({-1})[idx].item<double>();
          EXPECT_NEAR(ad, fd, 1e-7 + 1e-5 * std::abs(fd)) << item.key() << "[" << idx << "]";
          ++checked;
        }
      }
      EXPECT_GT(checked, 30);
    }
  }
}

TEST(Model, ParameterCountMatchesTheClosedForm) {
  for (PositionKind kind : kFamilies) {
    for (int variant = 0; variant < 7; ++variant) {
      config::ModelConfig c = tiny(kind, config::Objective::mlm);
      if (variant == 1) {
        c.embedding_size = 6;  // with the E -> H projection
        c.type_vocab_size = 2;
      }
      if (variant == 2) c.norm = config::NormPlacement::pre;
      if (variant == 3) {  // the attention options of 2025
        c.qk_norm = true;
        c.output_gate = true;
        c.output_norm = true;
        c.kv_shift = true;
        c.attention_scale = config::AttentionScale::ssmax;
      }
      if (variant == 4) {  // Llama's parts: RMSNorm (no bias), the gated feed-forward layer, one key/value head
        c.norm = config::NormPlacement::pre;
        c.norm_kind = config::NormKind::rms_norm;
        c.feed_forward = config::FeedForwardKind::glu;
        c.num_kv_heads = 1;
      }
      if (variant >= 5) {  // an imported decoder: no embedding norm, a linear head; 5: Llama's, 6: Qwen2's biases
        c.norm = config::NormPlacement::pre;
        c.embedding_norm = false;
        c.lm_head = config::LmHeadKind::linear;
        c.tie_output = variant == 6;
        c.qkv_bias = variant == 6;
        c.output_bias = false;
        c.ffn_bias = false;
      }
      SCOPED_TRACE(name(kind) + " variant " + std::to_string(variant));
      const int64_t V = c.vocab_size, E = c.embed_dim(), H = c.hidden_size, F = c.ffn_size, L = c.num_layers;
      int64_t expect = V * E + c.type_vocab_size * E + (variant >= 5 ? 0 : 2 * E);  // embeddings (+ LayerNorm)
      if (E != H) expect += E * H + H;                                              // embeddings_project
      const int64_t norm = variant == 4 ? H : 2 * H;                                // RMSNorm: weight only
      const int64_t up = variant == 4 ? 2 * (H * F + F) : H * F + F;                // the gate beside up
      const int64_t KV = c.kv_heads() * c.head_dim();                               // key/value width
      if (variant < 5) {
        expect += L * (2 * (H * H + H) + 2 * (H * KV + KV) + norm + up + (F * H + H) + norm);  // layers
        expect += H * E + E + 2 * E + V;                                                       // LM head (tied)
      } else {  // q, k, v biases only in variant 6; no head but the decoder, its own weight in variant 5
        expect += L * (H * H + 2 * H * KV + (variant == 6 ? H + 2 * KV : 0) + H * H + norm + H * F + F * H + norm);
        expect += variant == 5 ? V * H : 0;
      }
      if (c.norm == config::NormPlacement::pre) expect += norm;  // final norm
      if (variant == 3)  // q_norm, k_norm, W_g, SSMax's s, the output norm, the key and value shifts
        expect += L * (2 * H + H * H + c.num_heads + H + 2 * H * c.num_heads);
      // The family's own parameters: its row's count (config/position_families), checked here
      // against the module build_model makes; the memory estimate must count the same.
      expect += static_cast<int64_t>(config::position_parameters(c));
      EncoderModel m = build_model(c, 1);
      EXPECT_EQ(count_parameters(*m), expect);
      EXPECT_EQ(runtime::estimate_memory(c, 1, 1, false, false).parameters, double(expect));
    }
  }
}

TEST(Model, ParameterNamesFollowHuggingFaceRoFormer) {
  config::ModelConfig c = tiny(PositionKind::rope, config::Objective::mlm);
  c.embedding_size = 6;
  c.type_vocab_size = 2;
  EncoderModel m = build_model(c, 1);
  std::set<std::string> names;
  for (const auto& item : m->named_parameters()) names.insert(item.key());
  for (const std::string n :
       {"embeddings.word_embeddings.weight", "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight",
        "embeddings_project.weight", "encoder.layer.0.attention.self.query.weight",
        "encoder.layer.1.attention.self.value.bias", "encoder.layer.0.attention.output.dense.weight",
        "encoder.layer.0.attention.output.LayerNorm.bias", "encoder.layer.1.intermediate.dense.weight",
        "encoder.layer.1.output.dense.weight", "encoder.layer.1.output.LayerNorm.weight",
        "cls.predictions.transform.dense.weight", "cls.predictions.transform.LayerNorm.weight", "cls.predictions.bias"})
    EXPECT_TRUE(names.count(n)) << n;
}

TEST(Model, InitialisationFollowsBert) {
  config::ModelConfig c = tiny(PositionKind::rope, config::Objective::mlm);
  c.hidden_size = 64;
  c.ffn_size = 256;
  EncoderModel a = build_model(c, 5), b = build_model(c, 5);
  for (const auto& item : a->named_parameters()) {
    const torch::Tensor& p = item.value();
    EXPECT_TRUE(torch::equal(p, b->named_parameters()[item.key()])) << item.key();  // same seed, same weights
    if (item.key().find("LayerNorm.weight") != std::string::npos) {
      EXPECT_TRUE(torch::all(p == 1).item<bool>());
    } else if (item.key().size() > 4 && item.key().substr(item.key().size() - 4) == "bias") {
      EXPECT_TRUE(torch::all(p == 0).item<bool>()) << item.key();
    }
  }
  const torch::Tensor w = a->encoder->layer[0]->as<EncoderLayer>()->intermediate->dense->weight;
  EXPECT_NEAR(w.std().item<double>(), 0.02, 0.002);
}

// embed_scale=sqrt_d is Vaswani's E(x) * sqrt(d) before the position table is added: a scaled
// model equals an unscaled one whose token table is sqrt(E) times larger, for an additive family
// (where the scale matters) and a rotary one; its tokens start at N(0, E^-1/2).
TEST(Model, SqrtDEmbeddingScaleMultipliesTokensBeforeThePositionTable) {
  for (PositionKind kind : {PositionKind::sinusoidal, PositionKind::rope}) {
    config::ModelConfig scaled = tiny(kind, config::Objective::causal_lm);
    scaled.embed_scale = config::EmbedScale::sqrt_d;
    config::ModelConfig plain = scaled;
    plain.embed_scale = config::EmbedScale::none;
    EncoderModel a = build_double(scaled), b = build_double(plain);
    {
      torch::NoGradGuard no_grad;
      for (auto& item : b->named_parameters()) item.value().copy_(a->named_parameters()[item.key()]);
      b->embeddings->word_embeddings->weight.mul_(std::sqrt(static_cast<double>(scaled.embed_dim())));
    }
    const torch::Tensor ids = torch::tensor({{1, 5, 3, 9, 2, 7}}, torch::kLong);
    EXPECT_TRUE(torch::allclose(a->forward({ids}), b->forward({ids}), 1e-12, 1e-12)) << name(kind);
    // And the scale is not a no-op: without it the additive family computes something else.
    EncoderModel c = build_double(plain);
    {
      torch::NoGradGuard no_grad;
      for (auto& item : c->named_parameters()) item.value().copy_(a->named_parameters()[item.key()]);
    }
    if (kind == PositionKind::sinusoidal) {
      EXPECT_FALSE(torch::allclose(a->forward({ids}), c->forward({ids}), 1e-6, 1e-6));
    }
  }
  config::ModelConfig big = tiny(PositionKind::sinusoidal, config::Objective::causal_lm);
  big.vocab_size = 1000;
  big.hidden_size = 64;
  big.embed_scale = config::EmbedScale::sqrt_d;
  const double std = build_model(big, 3)->embeddings->word_embeddings->weight.std().item<double>();
  EXPECT_NEAR(std, 1.0 / 8.0, 0.005);
}

TEST(Model, QuickstartConfigsRunForwardAndBackward) {
  for (const std::string kind : {"rope", "sinusoidal", "learned", "t5_bias", "alibi", "none", "shaw", "transformer_xl",
                                 "deberta", "xpos", "fire", "kerple", "sandwich", "cope"}) {
    SCOPED_TRACE(kind);
    const auto loaded = config::load_config(roformer::testing::source_dir() + "/configs/quickstart/" + kind + ".yaml");
    EncoderModel m = build_model(loaded.config.model, 1);
    m->train();
    const torch::Tensor ids = torch::randint(0, loaded.config.model.vocab_size, {2, 64}, torch::kLong);
    const torch::Tensor loss = m->loss({ids}, ids);
    loss.backward();
    EXPECT_TRUE(std::isfinite(loss.item<double>()));
    // Untrained: loss near ln(V) since logits start near zero.
    EXPECT_NEAR(loss.item<double>(), std::log(static_cast<double>(loaded.config.model.vocab_size)), 0.5);
    for (const auto& p : m->parameters()) ASSERT_TRUE(p.grad().defined());
  }
}

TEST(Model, LearnedFamilyRefusesLongerInputsWithAClearError) {
  config::ModelConfig c = tiny(PositionKind::learned, config::Objective::mlm);
  EncoderModel m = build_model(c, 1);
  EXPECT_THROW(m->forward({torch::zeros({1, 17}, torch::kLong)}), UserError);
}

TEST(Model, FusedAndReferenceRopeGiveTheSameLossAndGradients) {
  for (bool rotate_value : {false, true}) {
    config::ModelConfig c = tiny(PositionKind::rope, config::Objective::mlm);
    c.position.rope.rotate_value = rotate_value;
    c.position.rope.scaling.kind = config::RopeScalingKind::yarn;
    c.position.rope.scaling.factor = 2.0;
    c.position.rope.impl = config::RopeKernel::fused;
    EncoderModel fused = build_double(c, 3);
    c.position.rope.impl = config::RopeKernel::reference;
    EncoderModel ref = build_double(c, 3);
    const torch::Tensor ids = torch::randint(0, 11, {2, 7}, torch::kLong);
    const torch::Tensor lf = fused->loss({ids}, ids), lr = ref->loss({ids}, ids);
    lf.backward();
    lr.backward();
    EXPECT_NEAR(lf.item<double>(), lr.item<double>(), 1e-12);
    auto rp = ref->named_parameters();
    for (const auto& item : fused->named_parameters())
      EXPECT_LT((item.value().grad() - rp[item.key()].grad()).abs().max().item<double>(), 1e-12) << item.key();
  }
}

namespace {

// One training pass of a float32 model with dropout from generator seed 99: its gradients by
// parameter name, and the generator's next draw (where the run's randomness goes on from).
struct Pass {
  std::map<std::string, torch::Tensor> grads;
  torch::Tensor next_draw;
};

Pass train_pass(const config::ModelConfig& c, int64_t checkpoint_every, uint64_t dropout_seed = 99) {
  EncoderModel m = build_model(c, 7, checkpoint_every);
  if (c.position.kind == PositionKind::cope) {  // its zero-initialised tables would hide the term
    torch::NoGradGuard no_grad;
    for (auto& item : m->position->named_parameters()) item.value().normal_(0.0, 0.5);
  }
  m->train();
  torch::manual_seed(5);
  const torch::Tensor ids = torch::randint(0, 11, {2, 10}, torch::kLong);
  torch::Tensor mask = torch::ones({2, 10}, torch::kLong);
  const bool mlm = c.objective == config::Objective::mlm;
  if (mlm) mask.index_put_({1, torch::indexing::Slice(7)}, 0);  // padding in the MLM pass
  const torch::Tensor targets = ids.masked_fill(mask == 0, -100);
  torch::manual_seed(dropout_seed);
  m->loss({ids, mlm ? mask : torch::Tensor()}, targets).backward();
  Pass p;
  for (const auto& item : m->named_parameters())
    if (item.value().grad().defined()) p.grads[item.key()] = item.value().grad().clone();
  p.next_draw = torch::rand({4});
  return p;
}

}  // namespace

// train.activation_checkpointing: every layer, or every second, recomputed in backward gives the
// unchecked gradients bitwise, dropout included (the generators are set back for the
// recomputation and put back after it), for every family and variant, causal and MLM with
// padding; a different dropout seed changes the gradients, so the masks are drawn.
TEST(Model, ActivationCheckpointingGivesTheUncheckedGradientsBitwise) {
  for (const Case& kase : all_cases()) {
    for (auto objective : {config::Objective::causal_lm, config::Objective::mlm}) {
      config::ModelConfig c = tiny(kase, objective);
      if (!defined_for(c)) continue;
      SCOPED_TRACE(kase.name + (objective == config::Objective::mlm ? " mlm" : " causal"));
      c.num_layers = std::max<int64_t>(c.num_layers, 3);
      if (config::has_layout(c)) with_layout(c, c.layout.preset, c.num_layers, c.layout.local.window);
      c.hidden_dropout = 0.1;
      c.attention_dropout = 0.1;
      const Pass plain = train_pass(c, 0);
      ASSERT_FALSE(plain.grads.empty());
      for (int64_t every : {1, 2}) {
        const Pass checked = train_pass(c, every);
        ASSERT_EQ(checked.grads.size(), plain.grads.size()) << "every " << every;
        for (const auto& [name, g] : plain.grads)
          EXPECT_TRUE(torch::equal(checked.grads.at(name), g)) << name << ", every " << every;
        EXPECT_TRUE(torch::equal(checked.next_draw, plain.next_draw)) << "every " << every;
      }
      const Pass other = train_pass(c, 1, 100);
      EXPECT_FALSE(torch::equal(other.grads.begin()->second, plain.grads.begin()->second));
    }
  }
}

TEST(Model, CachedPositionTablesEqualFreshOnesAcrossLengths) {
  // One model reused at lengths 12, 32, 12 (tables cached per length, dynamic NTK recomputed)
  // against a freshly built model at each length: identical outputs, in every family.
  for (PositionKind kind : kFamilies) {
    SCOPED_TRACE(name(kind));
    config::ModelConfig c = tiny(kind, config::Objective::causal_lm);
    c.position.max_positions = 32;
    c.position.rope.scaling.kind = config::RopeScalingKind::dynamic_ntk;
    c.position.rope.scaling.factor = 2.0;
    c.position.rope.scaling.original_max_positions = 16;
    EncoderModel reused = build_double(c, 9);
    for (int64_t length : {12, 32, 12}) {
      const torch::Tensor ids = torch::randint(0, 11, {2, length}, torch::kLong);
      EncoderModel fresh = build_double(c, 9);
      EXPECT_TRUE(torch::equal(reused->forward({ids}), fresh->forward({ids}))) << "length " << length;
    }
  }
}

TEST(Model, LossWithPrecomputedScoredIndexEqualsTheSearchedOne) {
  EncoderModel m = build_double(tiny(PositionKind::rope, config::Objective::mlm), 4);
  const torch::Tensor ids = torch::randint(0, 11, {3, 9}, torch::kLong);
  torch::Tensor targets = ids.clone();
  targets.masked_fill_(torch::rand({3, 9}) < 0.6, -100);
  const torch::Tensor index = (targets.reshape({-1}) != -100).nonzero().squeeze(1);
  EXPECT_TRUE(torch::equal(m->loss({ids}, targets, true), m->loss({ids}, targets, true, index)));
}

// Half-precision hidden states (what CUDA autocast now keeps end to end): a model cast to bf16
// runs every family forward with bf16 hidden states (the LayerNorms keep the dtype) and lands
// within bf16 rounding of the same model in double. Transcribed check: every LayerNorm output
// is normalised, so the final hidden states have per-token mean 0 and variance 1 in both.
TEST(Model, Bf16HiddenStatesStayBf16AndFollowTheDoubleModel) {
  for (PositionKind kind : kFamilies) {
    SCOPED_TRACE(name(kind));
    const config::ModelConfig c = tiny(kind, config::Objective::mlm);
    EncoderModel ref = build_double(c, 5);
    EncoderModel half = build_model(c, 5);
    half->to(torch::kBFloat16);
    half->eval();
    const torch::Tensor ids = torch::randint(0, 11, {2, 9}, torch::kLong);
    const torch::Tensor h = half->forward({ids}), r = ref->forward({ids});
    ASSERT_EQ(h.scalar_type(), torch::kBFloat16);
    const double err = (h.to(torch::kFloat64) - r).abs().max().item<double>();
    EXPECT_LT(err, 0.1) << "bf16 keeps about 3 significant digits over two layers";
    EXPECT_LT(h.to(torch::kFloat64).mean(-1).abs().max().item<double>(), 0.02);
  }
}

}  // namespace model_test
