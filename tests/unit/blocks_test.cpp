// The layer's parts (model/blocks/): RMSNorm against transformers' LlamaRMSNorm transcribed in
// double and its half-precision rounding, the gated feed-forward layer against its formula
// (SwiGLU and GeGLU), the add + norm paths, the names each part gives its parameters (BERT's
// kept for LayerNorm and the MLP), and grouped-query attention as multi-head attention whose
// key and value heads are repeated (transformers' repeat_kv) for every kind of family. Gradients of whole models built
// from these parts are held to finite differences in model_test (the llama_block and post_rms_geglu cases).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>
#include <string>

#include "roformer/model/blocks/feed_forward.h"
#include "roformer/model/blocks/norm.h"
#include "roformer/model/encoder.h"

namespace blocks_test {

using namespace roformer;
using namespace roformer::model;

namespace {

// transformers' LlamaRMSNorm.forward: hidden.to(float32); variance = hidden.pow(2).mean(-1,
// keepdim=True); hidden * rsqrt(variance + eps); weight * hidden.to(input_dtype). In double.
torch::Tensor llama_rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  const torch::Tensor h = x.to(torch::kFloat64);
  const torch::Tensor variance = h.pow(2).mean(-1, /*keepdim=*/true);
  return weight.to(torch::kFloat64) * (h / torch::sqrt(variance + eps));
}

std::set<std::string> parameter_names(torch::nn::Module& m) {
  std::set<std::string> names;
  for (const auto& item : m.named_parameters()) names.insert(item.key());
  return names;
}

}  // namespace

TEST(Blocks, RmsNormIsLlamasFormulaAndRoundsHalfPrecisionOnce) {
  torch::manual_seed(1);
  RmsNorm norm(24, 1e-6);
  {
    torch::NoGradGuard no_grad;
    norm->weight.uniform_(0.5, 1.5);
  }
  const torch::Tensor x = torch::randn({3, 5, 24}, torch::kFloat64) * 4 + 1;
  norm->to(torch::kFloat64);
  const torch::Tensor want = llama_rms_norm(x, norm->weight, 1e-6);
  EXPECT_LT((norm->forward(x) - want).abs().max().item<double>(), 1e-14);
  norm->to(torch::kFloat32);
  const torch::Tensor in_float = norm->forward(x.to(torch::kFloat32));
  EXPECT_EQ(in_float.scalar_type(), torch::kFloat32);
  EXPECT_LT((in_float.to(torch::kFloat64) - want).abs().max().item<double>(), 1e-5);
  // bf16 in, bf16 out, as in a bf16 Llama: normalised in float32 and rounded to bf16, then
  // scaled by the bf16 weight (one more rounding): within two bf16 steps (2^-8 relative each)
  // of the formula on the bf16 input and weight.
  const torch::Tensor x16 = x.to(torch::kBFloat16);
  const torch::Tensor half = norm->forward(x16);
  EXPECT_EQ(half.scalar_type(), torch::kBFloat16);
  const torch::Tensor want16 = llama_rms_norm(x16, norm->weight.to(torch::kBFloat16), 1e-6);
  const torch::Tensor err = (half.to(torch::kFloat64) - want16).abs() / want16.abs().clamp_min(1e-2);
  EXPECT_LT(err.max().item<double>(), 2 * std::pow(2.0, -8));
  // The weight multiplies the normalised features: a wrong weight is seen.
  torch::NoGradGuard no_grad;
  norm->weight.add_(0.01);
  EXPECT_GT((norm->forward(x.to(torch::kFloat32)).to(torch::kFloat64) - want).abs().max().item<double>(), 1e-3);
}

TEST(Blocks, GatedFeedForwardIsDownOfActivatedGateTimesUp) {
  torch::manual_seed(2);
  for (config::Activation act : {config::Activation::silu, config::Activation::gelu}) {
    SCOPED_TRACE(act == config::Activation::silu ? "SwiGLU" : "GeGLU");
    config::ModelConfig c;
    c.activation = act;
    c.feed_forward = config::FeedForwardKind::glu;
    Intermediate up(12, 20, config::FeedForwardKind::glu);
    torch::nn::Linear down(20, 12);
    up->to(torch::kFloat64);
    down->to(torch::kFloat64);
    const torch::Tensor x = torch::randn({2, 7, 12}, torch::kFloat64);
    auto linear = [](const torch::nn::Linear& l, const torch::Tensor& t) {
      return torch::matmul(t, l->weight.t()) + l->bias;
    };
    const torch::Tensor g = linear(up->gate, x);
    const torch::Tensor a = act == config::Activation::silu ? g / (1 + torch::exp(-g))  // x sigmoid(x)
                                                            : 0.5 * g * (1 + torch::erf(g / std::sqrt(2.0)));
    const torch::Tensor want = linear(down, a * linear(up->dense, x));
    EXPECT_LT((feed_forward(*up, down, x, c) - want).abs().max().item<double>(), 1e-12);
  }
}

TEST(Blocks, AddNormOfEveryKindAndKernelIsTheNormOfTheSum) {
  torch::manual_seed(3);
  for (config::NormKind kind : {config::NormKind::layer_norm, config::NormKind::rms_norm}) {
    for (config::NormKernel kernel : {config::NormKernel::auto_, config::NormKernel::reference}) {
      torch::nn::Module parent;
      NormPart part(parent, kind, 16, 1e-5);
      parent.to(torch::kFloat64);
      const torch::Tensor x = torch::randn({4, 16}, torch::kFloat64), r = torch::randn({4, 16}, torch::kFloat64);
      EXPECT_LT((part.add_norm(x, r, kernel) - part.forward(x + r)).abs().max().item<double>(), 1e-12);
      const auto names = parameter_names(parent);
      if (kind == config::NormKind::rms_norm) {
        EXPECT_EQ(names, (std::set<std::string>{"RMSNorm.weight"}));
      } else {
        EXPECT_EQ(names, (std::set<std::string>{"LayerNorm.weight", "LayerNorm.bias"}));
      }
    }
  }
}

TEST(Blocks, EachPartNamesItsParametersAndBertsNamesStay) {
  config::ModelConfig c;
  c.hidden_size = 16, c.num_heads = 2, c.ffn_size = 24, c.num_layers = 1;
  EncoderModel bert = build_model(c, 0);
  const auto bert_names = parameter_names(*bert);
  for (const char* name :
       {"encoder.layer.0.attention.output.LayerNorm.weight", "encoder.layer.0.intermediate.dense.weight",
        "encoder.layer.0.output.dense.weight", "encoder.layer.0.output.LayerNorm.bias"})
    EXPECT_TRUE(bert_names.count(name)) << name;
  c.norm = config::NormPlacement::pre;
  c.norm_kind = config::NormKind::rms_norm;
  c.feed_forward = config::FeedForwardKind::glu;
  c.activation = config::Activation::silu;
  EncoderModel llama = build_model(c, 0);
  const auto names = parameter_names(*llama);
  for (const char* name : {"encoder.layer.0.attention.output.RMSNorm.weight", "encoder.layer.0.output.RMSNorm.weight",
                           "encoder.layer.0.intermediate.gate.weight", "encoder.layer.0.intermediate.dense.weight",
                           "encoder.RMSNorm.weight"})
    EXPECT_TRUE(names.count(name)) << name;
  for (const std::string& name : names) {
    EXPECT_EQ(name.find("layer.0.output.LayerNorm"), std::string::npos) << name;
    EXPECT_EQ(name.find("RMSNorm.bias"), std::string::npos) << name;
  }
  EXPECT_TRUE(torch::equal(llama->encoder->norm.rms_norm->weight, torch::ones({16})));  // initialised to ones
}

// A model with num_kv_heads = G equals the multi-head model whose key and value weights repeat
// each of its G heads num_heads / G times (and every other weight is the same): the outputs
// agree in double for a rotary family, a bias family, one with score terms and one with QK-norm.
TEST(Blocks, GroupedQueryAttentionIsMultiHeadWithRepeatedKeyValueHeads) {
  using config::PositionKind;
  for (PositionKind kind : {PositionKind::rope, PositionKind::alibi, PositionKind::shaw, PositionKind::fire}) {
    for (int64_t kv_heads : {1, 2}) {
      SCOPED_TRACE(std::to_string(static_cast<int>(kind)) + " kv_heads " + std::to_string(kv_heads));
      config::ModelConfig c;
      c.hidden_size = 16, c.num_heads = 4, c.ffn_size = 24, c.num_layers = 2, c.vocab_size = 13;
      c.hidden_dropout = c.attention_dropout = 0.0;
      c.objective = config::Objective::causal_lm;
      c.position.kind = kind;
      c.qk_norm = kind == PositionKind::rope;
      c.num_kv_heads = kv_heads;
      EncoderModel gqa = build_model(c, 3);
      c.num_kv_heads = 0;
      EncoderModel mha = build_model(c, 4);
      gqa->to(torch::kFloat64);
      mha->to(torch::kFloat64);
      gqa->eval();
      mha->eval();
      const int64_t group = 4 / kv_heads, D = 4;
      {
        torch::NoGradGuard no_grad;
        auto theirs = gqa->named_parameters();
        for (auto& item : mha->named_parameters()) {
          const torch::Tensor& src = theirs[item.key()];
          const bool repeated = item.key().find("self.key") != std::string::npos ||
                                item.key().find("self.value") != std::string::npos ||
                                item.key().find("k_norm") != std::string::npos;
          if (!repeated) {
            item.value().copy_(src);
          } else if (item.key().find("k_norm") != std::string::npos) {  // [heads, D]
            item.value().copy_(src.repeat_interleave(group, 0));
          } else {  // rows head by head: [kv_heads * D, ...] -> [heads * D, ...]
            const auto rows = src.view({kv_heads, D, -1}).repeat_interleave(group, 0);
            item.value().copy_(rows.reshape(item.value().sizes()));
          }
        }
      }
      torch::manual_seed(5);
      const torch::Tensor ids = torch::randint(0, 13, {2, 9}, torch::kLong);
      torch::NoGradGuard no_grad;
      EXPECT_LT((gqa->forward({ids}) - mha->forward({ids})).abs().max().item<double>(), 1e-12);
      EXPECT_EQ(gqa->encoder->layer[0]->as<EncoderLayer>()->attention->self->key->weight.size(0), kv_heads * D);
    }
  }
}

}  // namespace blocks_test
