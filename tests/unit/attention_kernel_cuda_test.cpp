// GPU (label gpu; skipped without a CUDA GPU): under bf16 autocast the model's attention runs
// LibTorch's fused SDPA kernels, and the kernel probe (model/attention_kernel.h) reports the one
// that ran (the ATen op a RecordFunction observer saw): flash or cuDNN without a mask, the
// memory-efficient or cuDNN kernel with a float mask (padding, ALiBi, T5), never math; with the
// deterministic switches (train.deterministic) math and only math.
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "attention_ops.h"
#include "roformer/common/autocast.h"
#include "roformer/model/attention_kernel.h"
#include "roformer/model/encoder.h"
#include "roformer/run/device_setup.h"

namespace attention_kernel_cuda_test {

using namespace roformer;
using namespace roformer::model;
using config::PositionKind;

namespace {

config::ModelConfig small(PositionKind kind) {
  config::ModelConfig c;
  c.objective = config::Objective::mlm;
  c.vocab_size = 64;
  c.hidden_size = 128;
  c.num_heads = 2;  // head_dim 64, inside every fused kernel's limits
  c.num_layers = 2;
  c.ffn_size = 256;
  c.position.kind = kind;
  c.position.max_positions = 256;
  c.position.rope.rotary_dim = c.head_dim();
  return c;
}

using roformer::testing::expected_sdpa_ops;
using Observed = roformer::testing::ObservedAttention;

// One bf16-autocast MLM loss and backward of a [4, 128] batch on the GPU (the last row padded
// after 100 tokens when `pad`), dropout on as in training.
Observed run_on_gpu(PositionKind kind, bool pad) {
  const config::ModelConfig c = small(kind);
  EncoderModel m = build_model(c, 5);
  m->to(torch::kCUDA);
  m->train();
  torch::manual_seed(2);
  EncoderInput in;
  in.input_ids = torch::randint(0, c.vocab_size, {4, 128}, torch::kLong);
  if (pad) {
    in.attention_mask = torch::ones({4, 128}, torch::kLong);
    in.attention_mask[3].narrow(0, 100, 28).zero_();
    in.attention_mask = in.attention_mask.cuda();
  }
  const torch::Tensor targets =
      torch::where(torch::rand({4, 128}) < 0.15, in.input_ids, torch::full({4, 128}, -100L)).cuda();
  in.input_ids = in.input_ids.cuda();
  return roformer::testing::observe_attention(/*cuda=*/true, [&] {
    torch::Tensor loss;
    {
      AutocastGuard autocast(true);
      loss = m->loss(in, targets);
    }
    loss.backward();
    torch::cuda::synchronize();
  });
}

bool one_of(const std::vector<std::string>& kernels, const std::set<std::string>& allowed) {
  return kernels.size() == 1 && allowed.count(kernels[0]) == 1;
}

}  // namespace

TEST(AttentionKernelCuda, Bf16AttentionRunsTheFusedSdpaKernels) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible";
  const Observed plain = run_on_gpu(PositionKind::rope, false);
  EXPECT_TRUE(one_of(plain.kernels, {"sdpa-flash", "sdpa-cudnn"})) << ::testing::PrintToString(plain.kernels);
  EXPECT_EQ(plain.sdpa_ops, expected_sdpa_ops(plain.kernels, true));
  for (PositionKind kind : {PositionKind::rope, PositionKind::alibi, PositionKind::t5_bias}) {
    SCOPED_TRACE(config::position_kind_names().name(kind));
    const Observed masked = run_on_gpu(kind, true);
    EXPECT_TRUE(one_of(masked.kernels, {"sdpa-efficient", "sdpa-cudnn"})) << ::testing::PrintToString(masked.kernels);
    EXPECT_EQ(masked.sdpa_ops, expected_sdpa_ops(masked.kernels, true));
  }
}

TEST(AttentionKernelCuda, DeterministicSwitchesLeaveOnlyTheMathKernel) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible";
  config::TrainConfig t;
  t.deterministic = true;
  run::apply_cuda_switches(t, torch::Device(torch::kCUDA, 0));
  for (bool pad : {false, true}) {
    const Observed o = run_on_gpu(PositionKind::rope, pad);
    EXPECT_EQ(o.kernels, std::vector<std::string>{"sdpa-math"});
    EXPECT_EQ(o.sdpa_ops, std::set<std::string>{"aten::_scaled_dot_product_attention_math"});
  }
}

}  // namespace attention_kernel_cuda_test
