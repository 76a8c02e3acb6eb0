// FusedAdamW against LibTorch's torch::optim::AdamW (the unfused reference): equal to 1e-6
// relative after 100 steps with two decay groups; its checkpoint archive is LibTorch AdamW's
// (each loads the other's and continues identically); a found_inf flag of 1 changes nothing.
// Also the MFU formula, transcribed by hand for BERT-base.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sstream>

#include "roformer/model/encoder.h"
#include "roformer/run/mfu.h"
#include "roformer/train/cuda_graph_step.h"
#include "roformer/train/fused_adamw.h"
#include "roformer/train/step.h"

namespace fused_adamw_test {

using namespace roformer;

namespace {

// Three parameters: two matrices (decayed) and a vector (not), like the trainer's groups.
std::vector<torch::Tensor> make_params(uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> ps{torch::randn({7, 5}), torch::randn({3, 4}), torch::randn({9})};
  for (auto& p : ps) p.set_requires_grad(true);
  return ps;
}

std::vector<torch::optim::OptimizerParamGroup> groups(const std::vector<torch::Tensor>& ps) {
  auto opts = [](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(2e-2).betas({0.9, 0.98}).eps(1e-8).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> g;
  g.emplace_back(std::vector<torch::Tensor>{ps[0], ps[1]}, opts(0.1));
  g.emplace_back(std::vector<torch::Tensor>{ps[2]}, opts(0.0));
  return g;
}

void set_grads(std::vector<torch::Tensor>& ps, int step) {
  torch::manual_seed(1000 + step);
  for (auto& p : ps) p.mutable_grad() = torch::randn_like(p) * (1.0 + step % 7);
}

// Largest difference relative to the tensor's scale (max |b|), over the tensors: float32
// rounding of two arithmetic orders, not the relative error of elements that cross zero.
double max_rel_diff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>() / b[i].abs().max().item<double>());
  return worst;
}

}  // namespace

TEST(FusedAdamW, MatchesLibTorchAdamWAfter100Steps) {
  auto pf = make_params(1), pr = make_params(1);
  train::FusedAdamW fused(groups(pf), torch::optim::AdamWOptions(2e-2));
  torch::optim::AdamW reference(groups(pr), torch::optim::AdamWOptions(2e-2));
  for (int step = 0; step < 100; ++step) {
    const double lr = 2e-2 * (1.0 - step / 200.0);  // a schedule, as the trainer sets it
    for (auto* o : std::vector<torch::optim::Optimizer*>{&fused, &reference})
      for (auto& g : o->param_groups()) g.options().set_lr(lr);
    set_grads(pf, step);
    set_grads(pr, step);
    fused.step();
    reference.step();
  }
  EXPECT_LT(max_rel_diff(pf, pr), 1e-6);
  EXPECT_GT((pf[0] - make_params(1)[0]).abs().max().item<double>(), 0.1);  // the parameters did move
  EXPECT_EQ(fused.completed_steps(), 100);
}

TEST(FusedAdamW, CheckpointArchiveIsLibTorchAdamWs) {
  auto pf = make_params(2), pr = make_params(2);
  train::FusedAdamW fused(groups(pf), torch::optim::AdamWOptions(2e-2));
  torch::optim::AdamW reference(groups(pr), torch::optim::AdamWOptions(2e-2));
  for (int step = 0; step < 10; ++step) {
    set_grads(pf, step);
    set_grads(pr, step);
    fused.step();
    reference.step();
  }
  // Swap states: the reference's archive into a fresh FusedAdamW and the fused one's into a fresh AdamW.
  std::stringstream from_fused, from_reference;
  {
    torch::serialize::OutputArchive a, b;
    fused.save(a);
    reference.save(b);
    a.save_to(from_fused);
    b.save_to(from_reference);
  }
  auto qf = pr, qr = pf;  // same values, new optimizers over them
  for (auto& p : qf) p = p.detach().clone().set_requires_grad(true);
  for (auto& p : qr) p = p.detach().clone().set_requires_grad(true);
  train::FusedAdamW fused2(groups(qf), torch::optim::AdamWOptions(2e-2));
  torch::optim::AdamW reference2(groups(qr), torch::optim::AdamWOptions(2e-2));
  {
    torch::serialize::InputArchive a, b;
    a.load_from(from_reference);
    b.load_from(from_fused);
    fused2.load(a);
    reference2.load(b);
  }
  EXPECT_EQ(fused2.completed_steps(), 10);
  // Each restored optimizer continues exactly like the one whose archive it loaded.
  for (int step = 10; step < 30; ++step) {
    for (auto* ps : {&pf, &pr, &qf, &qr}) set_grads(*ps, step);
    fused.step();       // on pf
    reference.step();   // on pr
    fused2.step();      // on qf = pr's values, reference's moments
    reference2.step();  // on qr = pf's values, fused's moments
  }
  EXPECT_LT(max_rel_diff(qf, pr), 1e-6);
  EXPECT_LT(max_rel_diff(qr, pf), 1e-6);
}

TEST(FusedAdamW, FoundInfSkipsTheUpdateOnTheDevice) {
  auto ps = make_params(3);
  train::FusedAdamW opt(groups(ps), torch::optim::AdamWOptions(2e-2));
  set_grads(ps, 0);
  opt.step();
  std::vector<torch::Tensor> before;
  for (const auto& p : ps) before.push_back(p.detach().clone());
  const torch::Tensor flag = torch::ones({}, torch::kFloat32);
  opt.set_found_inf(flag);
  set_grads(ps, 1);
  opt.step();
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_TRUE(torch::equal(ps[i], before[i])) << i;
  EXPECT_EQ(opt.completed_steps(), 1);
  flag.zero_();  // the same flag tensor, now clear: the update happens
  opt.step();
  EXPECT_FALSE(torch::equal(ps[0], before[0]));
  EXPECT_EQ(opt.completed_steps(), 2);
}

TEST(Mfu, FlopsPerTokenIsPaLMsFormula) {
  config::ModelConfig m;  // BERT-base: 12 x 768, FFN 3072, vocabulary 30522
  m.hidden_size = 768;
  m.num_layers = 12;
  m.num_heads = 12;
  m.ffn_size = 3072;
  m.vocab_size = 30522;
  config::DataConfig d;
  d.seq_len = 512;
  d.mask_prob = 0.15;
  const double layers = 12 * (4.0 * 768 * 768 + 2.0 * 768 * 3072);
  const double expected = 6 * (layers + 768.0 * 768) + 6 * 768.0 * 30522 * 0.15 + 12.0 * 12 * 768 * 512;
  EXPECT_DOUBLE_EQ(run::training_flops_per_token(m, d), expected);
  m.objective = config::Objective::causal_lm;  // every position is scored
  EXPECT_DOUBLE_EQ(run::training_flops_per_token(m, d), expected + 6 * 768.0 * 30522 * 0.85);
  m.feed_forward = config::FeedForwardKind::glu;  // a third FFN matrix, the gate
  EXPECT_DOUBLE_EQ(run::training_flops_per_token(m, d), expected + 6 * 768.0 * 30522 * 0.85 + 6 * 12 * 768.0 * 3072);
  m.num_kv_heads = 4;  // grouped-query attention: k and v project to 4 x 64 = 256 features, not 768
  EXPECT_DOUBLE_EQ(run::training_flops_per_token(m, d),
                   expected + 6 * 768.0 * 30522 * 0.85 + 6 * 12 * 768.0 * 3072 - 6 * 12 * 2 * 768.0 * (768 - 256));
  config::TrainConfig t;
  EXPECT_EQ(run::peak_tflops(t, torch::kCPU, false), 0);  // no peak for the CPU
  t.peak_tflops = 2.5;
  EXPECT_EQ(run::peak_tflops(t, torch::kCPU, false), 2.5);
}

TEST(CudaGraphStep, CapacityCoversTheScoredPositionsAndTheCpuIsRefused) {
  EXPECT_EQ(train::scored_capacity(4096, /*mlm=*/false, 0.15), 4096);  // causal: every position
  // MLM at 15 %: mean 614.4, sd sqrt(614.4 * 0.85) = 22.85 -> ceil(614.4 + 182.8 + 16) = 814
  EXPECT_EQ(train::scored_capacity(4096, true, 0.15), 814);
  EXPECT_EQ(train::scored_capacity(8, true, 0.5), 8);  // never above the positions
  config::ModelConfig c;
  c.vocab_size = 11;
  c.hidden_size = 8;
  c.num_heads = 2;
  c.num_layers = 1;
  c.ffn_size = 16;
  model::EncoderModel m = model::build_model(c, 1);
  config::TrainConfig t;
  auto opt = train::make_optimizer(m, t);
  std::string why;
  EXPECT_EQ(train::make_graphed_step(m, *opt, torch::kCPU, {}, &why), nullptr);
  EXPECT_EQ(why, "training runs on the CPU");
}

}  // namespace fused_adamw_test
