// Training-step components: LR schedule at its boundaries, weight decay only on matrices,
// clipping to the global norm, accumulation of k micro-batches equal to one k-times larger
// batch (double precision), the non-finite guard leaving parameters untouched, and a tiny model
// overfitting a tiny batch (the loop learns at all); the logged step line's rounding and ETA.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "roformer/run/metrics.h"
#include "roformer/run/tensorboard_writer.h"
#include "roformer/train/lr_schedule.h"
#include "roformer/train/step.h"

namespace train_step_test {

using namespace roformer;

namespace {

config::ModelConfig tiny_model() {
  config::ModelConfig c;
  c.vocab_size = 13;
  c.hidden_size = 16;
  c.num_heads = 2;
  c.num_layers = 2;
  c.ffn_size = 32;
  c.hidden_dropout = 0;
  c.attention_dropout = 0;
  c.position.rope.rotary_dim = 8;
  c.position.rope.scaling.original_max_positions = 8;
  return c;
}

data::Batch make_batch(int64_t b, int64_t s, uint64_t seed) {
  torch::manual_seed(seed);
  data::Batch batch;
  batch.input_ids = torch::randint(0, 13, {b, s}, torch::kLong);
  batch.targets = torch::randint(0, 13, {b, s}, torch::kLong);
  batch.targets.masked_fill_(torch::rand({b, s}) < 0.4, -100);
  batch.scored = (batch.targets != -100).sum().item<int64_t>();
  return batch;
}

}  // namespace

TEST(LrSchedule, WarmupThenDecayToTheFloor) {
  config::TrainConfig t;
  t.lr = 1.0;
  t.min_lr_ratio = 0.1;
  t.steps = 110;
  t.warmup_steps = 10;
  EXPECT_DOUBLE_EQ(train::learning_rate(t, 0), 0.1);
  EXPECT_DOUBLE_EQ(train::learning_rate(t, 9), 1.0);
  EXPECT_DOUBLE_EQ(train::learning_rate(t, 10), 1.0);     // decay starts at the peak
  EXPECT_NEAR(train::learning_rate(t, 109), 0.1, 1e-12);  // and ends at the floor
  EXPECT_NEAR(train::learning_rate(t, 59), 0.1 + 0.45 * (1 + std::cos(M_PI * 49.0 / 99.0)), 1e-12);
  t.schedule = config::LrSchedule::linear;
  EXPECT_NEAR(train::learning_rate(t, 109), 0.1, 1e-12);
  EXPECT_NEAR(train::learning_rate(t, 10 + 33), 1.0 - 0.9 / 3.0, 1e-12);
  t.schedule = config::LrSchedule::constant;
  EXPECT_DOUBLE_EQ(train::learning_rate(t, 100), 1.0);
  // Warmup longer than training: still warming up at the last step, never above the peak.
  t.warmup_steps = 500;
  t.schedule = config::LrSchedule::cosine;
  EXPECT_DOUBLE_EQ(train::learning_rate(t, 109), 110.0 / 500.0);
  // Zero warmup: the first step runs at the peak.
  t.warmup_steps = 0;
  EXPECT_DOUBLE_EQ(train::learning_rate(t, 0), 1.0);
}

TEST(TrainStep, WeightDecayOnlyOnMatrices) {
  model::EncoderModel m = model::build_model(tiny_model(), 1);
  config::TrainConfig t;
  t.lr = 0.1;
  t.weight_decay = 0.5;
  auto opt = train::make_optimizer(m, t);
  std::map<std::string, torch::Tensor> before;
  for (const auto& p : m->named_parameters()) before[p.key()] = p.value().detach().clone();
  // Zero gradients: AdamW moves parameters only through decoupled weight decay.
  for (auto& p : m->parameters()) p.mutable_grad() = torch::zeros_like(p);
  opt->step();
  for (const auto& p : m->named_parameters()) {
    const torch::Tensor& old = before[p.key()];
    if (p.value().dim() >= 2) {
      EXPECT_TRUE(torch::allclose(p.value(), old * (1 - 0.1 * 0.5))) << p.key();
    } else {
      EXPECT_TRUE(torch::equal(p.value(), old)) << p.key() << " (biases and LayerNorm are not decayed)";
    }
  }
}

TEST(TrainStep, ClipsToTheGlobalNorm) {
  model::EncoderModel m = model::build_model(tiny_model(), 2);
  config::TrainConfig t;
  t.lr = 1e-3;
  auto opt = train::make_optimizer(m, t);
  torch::optim::SGD sgd(m->parameters(), torch::optim::SGDOptions(1.0));
  const data::Batch batch = make_batch(4, 8, 3);
  std::map<std::string, torch::Tensor> before;
  for (const auto& p : m->named_parameters()) before[p.key()] = p.value().detach().clone();
  const auto r = train::train_step(m, sgd, batch, 1, /*grad_clip=*/0.01, torch::kCPU, false);
  ASSERT_GT(r.grad_norm_value(), 0.01);
  // With SGD(lr=1) the update is the clipped gradient: its global norm is the clip value.
  double sq = 0;
  for (const auto& p : m->named_parameters())
    sq += (before[p.key()] - p.value()).to(torch::kFloat64).pow(2).sum().item<double>();
  EXPECT_NEAR(std::sqrt(sq), 0.01, 1e-6);
}

TEST(TrainStep, AccumulatedMicroBatchesEqualOneLargeBatch) {
  config::ModelConfig c = tiny_model();
  for (int64_t k : {2, 4}) {
    model::EncoderModel a = model::build_model(c, 5), b = model::build_model(c, 5);
    a->to(torch::kFloat64);
    b->to(torch::kFloat64);
    config::TrainConfig t;
    t.lr = 1e-2;
    auto oa = train::make_optimizer(a, t), ob = train::make_optimizer(b, t);
    for (int step = 0; step < 3; ++step) {
      const data::Batch batch = make_batch(8, 6, 10 + step);
      const auto ra = train::train_step(a, *oa, batch, 1, 1.0, torch::kCPU, false);
      const auto rb = train::train_step(b, *ob, batch, k, 1.0, torch::kCPU, false);
      EXPECT_NEAR(ra.loss_value(), rb.loss_value(), 1e-12);
      EXPECT_NEAR(ra.grad_norm_value(), rb.grad_norm_value(), 1e-12);
    }
    auto pb = b->named_parameters();
    for (const auto& p : a->named_parameters())
      EXPECT_LT((p.value() - pb[p.key()]).abs().max().item<double>(), 1e-10) << p.key() << " k=" << k;
  }
}

TEST(TrainStep, NonFiniteLossChangesNothing) {
  model::EncoderModel m = model::build_model(tiny_model(), 4);
  config::TrainConfig t;
  auto opt = train::make_optimizer(m, t);
  std::map<std::string, torch::Tensor> before;
  for (const auto& p : m->named_parameters()) before[p.key()] = p.value().detach().clone();
  const auto r = train::train_step(m, *opt, make_batch(4, 8, 1), 1, 1.0, torch::kCPU, false, /*poison=*/true);
  EXPECT_FALSE(r.finite());
  for (const auto& p : m->named_parameters()) EXPECT_TRUE(torch::equal(p.value(), before[p.key()])) << p.key();
  EXPECT_EQ(opt->completed_steps(), 0);  // the skipped update is not counted (bias correction stays right)
  // The next finite step is the optimizer's first.
  const auto ok = train::train_step(m, *opt, make_batch(4, 8, 2), 1, 1.0, torch::kCPU, false);
  EXPECT_TRUE(ok.finite());
  EXPECT_EQ(opt->completed_steps(), 1);
}

TEST(TrainStep, TinyModelOverfitsATinyBatch) {
  model::EncoderModel m = model::build_model(tiny_model(), 6);
  config::TrainConfig t;
  t.lr = 3e-3;
  t.weight_decay = 0;
  auto opt = train::make_optimizer(m, t);
  const data::Batch batch = make_batch(4, 8, 7);
  double first = 0, last = 0;
  for (int step = 0; step < 300; ++step) {
    const auto r = train::train_step(m, *opt, batch, 1, 1.0, torch::kCPU, false);
    if (step == 0) first = r.loss_value();
    last = r.loss_value();
  }
  EXPECT_GT(first, 2.0);
  EXPECT_LT(last, 0.05) << "first " << first;
}

TEST(StepRecord, LineRoundsItsValuesAndGivesTheRemainingTime) {
  run::StepRecord r;
  r.step = 50;
  r.steps = 200;
  r.tokens = 50 * 2048;  // 2048 tokens a step
  r.loss = 2.345678;
  r.lr = 1.0 / 3000;
  r.grad_norm = 0.98765;
  r.tokens_per_s = 2048;  // one step a second: 150 s to go
  r.tflops = 0.123;
  EXPECT_EQ(r.line(), "step 50/200 | loss 2.3457 | lr 0.000333 | grad 0.988 | 2048 tok/s | 0.12 TFLOP/s | ETA 2m30s");
  r.lr = 2.5e-5;
  r.step = r.steps;
  r.tokens = 200 * 2048;
  EXPECT_EQ(r.line(), "step 200/200 | loss 2.3457 | lr 2.5e-05 | grad 0.988 | 2048 tok/s | 0.12 TFLOP/s");
}

// The scalars train.tensorboard logs: every finite number of a train or eval record, tagged by
// type (and split), fine-tuning's nested metrics flattened; nothing from other records.
TEST(TensorBoard, ScalarsAreTheRecordsFiniteNumbersTaggedByTypeAndSplit) {
  using nlohmann::json;
  using Scalars = std::vector<std::pair<std::string, double>>;
  EXPECT_EQ(run::tensorboard_scalars(json{{"type", "train"}, {"step", 20}, {"loss", 2.5}, {"lr", 1e-3}}),
            (Scalars{{"train/loss", 2.5}, {"train/lr", 1e-3}}));
  const json dev{
      {"type", "eval"}, {"split", "dev"}, {"step", 40}, {"loss", 0.5}, {"metrics", {{"accuracy", 0.75}, {"f1", 0.5}}},
      {"note", "text"}};
  EXPECT_EQ(run::tensorboard_scalars(dev),
            (Scalars{{"eval/dev/loss", 0.5}, {"eval/dev/accuracy", 0.75}, {"eval/dev/f1", 0.5}}));
  EXPECT_EQ(run::tensorboard_scalars(json{{"type", "train"}, {"step", 3}, {"loss", std::nan("")}, {"lr", 0.1}}),
            (Scalars{{"train/lr", 0.1}}));
  EXPECT_TRUE(run::tensorboard_scalars(json{{"type", "init"}, {"step", 0}, {"source_step", 600}}).empty());
  EXPECT_TRUE(run::tensorboard_scalars(json{{"type", "train"}, {"loss", 1.0}}).empty());
}

}  // namespace train_step_test
