// The attention kernel probe (model/attention_kernel.h): its names and scoping, and for every
// path of the model on the CPU, that what it reports is what LibTorch dispatched (the ATen op a
// RecordFunction observer saw): flash for SDPA in fp32 and fp64 with or without a mask, math
// where LibTorch's CPU flash kernel cannot serve (attention dropout, a mask that needs a
// gradient) or is switched off, no SDPA at all for the explicit-scores and linear paths.
#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <thread>

#include "attention_ops.h"
#include "roformer/model/attention_kernel.h"
#include "roformer/model/encoder.h"

namespace attention_kernel_test {

using namespace roformer;
using namespace roformer::model;
using config::PositionKind;

namespace {

config::ModelConfig tiny(PositionKind kind) {
  config::ModelConfig c;
  c.objective = config::Objective::mlm;
  c.vocab_size = 13;
  c.hidden_size = 32;
  c.num_heads = 2;
  c.num_layers = 2;
  c.ffn_size = 64;
  c.position.kind = kind;
  c.position.max_positions = 64;
  c.position.rope.rotary_dim = c.head_dim();
  c.attention_dropout = 0.0;  // LibTorch's CPU flash kernel has no dropout (see the test below)
  c.attention_kernel = config::AttentionKernel::reference;  // SDPA's choices are the subject here
  return c;
}

using roformer::testing::expected_sdpa_ops;
using Observed = roformer::testing::ObservedAttention;

// One MLM loss of a [2, 24] batch, the second row padded after 17 tokens when `pad`: in training
// (dropout as configured, then backward) or as evaluation runs it (eval mode, no autograd).
Observed run(const config::ModelConfig& c, torch::Dtype dtype, bool pad, bool train = true) {
  EncoderModel m = build_model(c, 3);
  m->to(dtype);
  m->train(train);
  torch::manual_seed(1);
  EncoderInput in;
  in.input_ids = torch::randint(0, c.vocab_size, {2, 24}, torch::kLong);
  if (pad) {
    in.attention_mask = torch::ones({2, 24}, torch::kLong);
    in.attention_mask[1].narrow(0, 17, 7).zero_();
  }
  const torch::Tensor targets = torch::where(torch::rand({2, 24}) < 0.3, in.input_ids, torch::full({2, 24}, -100L));
  return roformer::testing::observe_attention(/*cuda=*/false, [&] {
    if (train) {
      m->loss(in, targets).backward();
    } else {
      torch::NoGradGuard no_grad;
      m->loss(in, targets);
    }
  });
}

}  // namespace

TEST(AttentionKernel, NamesEveryBackend) {
  EXPECT_EQ(sdpa_kernel_name(static_cast<int64_t>(at::SDPBackend::math)), "sdpa-math");
  EXPECT_EQ(sdpa_kernel_name(static_cast<int64_t>(at::SDPBackend::flash_attention)), "sdpa-flash");
  EXPECT_EQ(sdpa_kernel_name(static_cast<int64_t>(at::SDPBackend::efficient_attention)), "sdpa-efficient");
  EXPECT_EQ(sdpa_kernel_name(static_cast<int64_t>(at::SDPBackend::cudnn_attention)), "sdpa-cudnn");
  EXPECT_EQ(sdpa_kernel_name(static_cast<int64_t>(at::SDPBackend::overrideable)), "sdpa-overrideable");
  EXPECT_EQ(sdpa_kernel_name(-1), "sdpa-unknown(-1)");
}

TEST(AttentionKernel, ProbeRecordsOnItsOwnThreadAndInnerProbesHideOuterOnes) {
  EXPECT_EQ(AttentionKernelProbe::active(), nullptr);
  AttentionKernelProbe outer;
  EXPECT_EQ(AttentionKernelProbe::active(), &outer);
  EXPECT_EQ(outer.summary(), "none");
  {
    AttentionKernelProbe inner;
    AttentionKernelProbe::active()->record("sdpa-flash");
    AttentionKernelProbe::active()->record("sdpa-math");
    AttentionKernelProbe::active()->record("sdpa-flash");
    EXPECT_EQ(inner.summary(), "sdpa-flash + sdpa-math");  // first sightings, in order
  }
  EXPECT_EQ(AttentionKernelProbe::active(), &outer);
  EXPECT_TRUE(outer.kernels().empty());
  AttentionKernelProbe* seen_elsewhere = &outer;
  std::thread([&] { seen_elsewhere = AttentionKernelProbe::active(); }).join();
  EXPECT_EQ(seen_elsewhere, nullptr);
}

TEST(AttentionKernel, SdpaFamiliesRunTheFlashKernelOnTheCpu) {
  // No mask (RoPE, MLM), a padding mask, and a float bias mask (ALiBi, T5) in fp32 and fp64, in
  // training and in evaluation. The exception is LibTorch's rule, not ours: its CPU flash kernel
  // gives no gradient to the mask, so learned biases (T5, KERPLE) train through the math kernel.
  for (PositionKind kind :
       {PositionKind::rope, PositionKind::alibi, PositionKind::t5_bias, PositionKind::kerple, PositionKind::sandwich})
    for (bool pad : {false, true})
      for (torch::Dtype dtype : {torch::kFloat32, torch::kFloat64})
        for (bool train : {true, false}) {
          SCOPED_TRACE(config::position_kind_names().name(kind) + (pad ? " padded " : " ") + c10::toString(dtype) +
                       (train ? " training" : " evaluating"));
          const Observed o = run(tiny(kind), dtype, pad, train);
          const bool learned_mask = (kind == PositionKind::t5_bias || kind == PositionKind::kerple) && train;
          EXPECT_EQ(o.kernels, std::vector<std::string>{learned_mask ? "sdpa-math" : "sdpa-flash"});
          EXPECT_EQ(o.sdpa_ops, expected_sdpa_ops(o.kernels, false));
        }
}

TEST(AttentionKernel, AttentionDropoutInTrainingTakesTheMathKernelOnTheCpu) {
  // LibTorch's CPU flash kernel refuses dropout, so a training forward with attention dropout
  // runs math; the same model in eval mode (no dropout) runs flash again.
  config::ModelConfig c = tiny(PositionKind::rope);
  c.attention_dropout = 0.1;
  const Observed training = run(c, torch::kFloat32, false);
  EXPECT_EQ(training.kernels, std::vector<std::string>{"sdpa-math"});
  EXPECT_EQ(training.sdpa_ops, std::set<std::string>{"aten::_scaled_dot_product_attention_math"});
  const Observed evaluating = run(c, torch::kFloat32, false, /*train=*/false);
  EXPECT_EQ(evaluating.kernels, std::vector<std::string>{"sdpa-flash"});
  EXPECT_EQ(evaluating.sdpa_ops, expected_sdpa_ops(evaluating.kernels, false));
}

TEST(AttentionKernel, TheProbeFollowsTheSdpaSwitches) {
  // What train.deterministic does on CUDA (math SDPA only); the CPU honours the same switch.
  auto& ctx = at::globalContext();
  const bool flash = ctx.userEnabledFlashSDP();
  ctx.setSDPUseFlash(false);
  const Observed o = run(tiny(PositionKind::rope), torch::kFloat32, true);
  ctx.setSDPUseFlash(flash);
  EXPECT_EQ(o.kernels, std::vector<std::string>{"sdpa-math"});
  EXPECT_EQ(o.sdpa_ops, std::set<std::string>{"aten::_scaled_dot_product_attention_math"});
}

TEST(AttentionKernel, ScoreTermAndLinearPathsRunNoSdpa) {
  for (PositionKind kind : {PositionKind::shaw, PositionKind::transformer_xl, PositionKind::deberta, PositionKind::fire,
                            PositionKind::cope}) {
    config::ModelConfig c = tiny(kind);
    c.position.deberta.position_buckets = 8;
    c.position.deberta.max_relative_positions = 16;
    c.position.cope.max_positions = 8;
    if (kind == PositionKind::cope) c.objective = config::Objective::causal_lm;
    const Observed o = run(c, torch::kFloat32, true);
    EXPECT_EQ(o.kernels, std::vector<std::string>{attention_kernel::kExplicitScores})
        << config::position_kind_names().name(kind);
    EXPECT_TRUE(o.sdpa_ops.empty());
  }
  config::ModelConfig c = tiny(PositionKind::rope);
  c.attention = config::AttentionKind::linear;
  const Observed o = run(c, torch::kFloat32, false);
  EXPECT_EQ(o.kernels, std::vector<std::string>{attention_kernel::kLinear});
  EXPECT_TRUE(o.sdpa_ops.empty());
}

}  // namespace attention_kernel_test
