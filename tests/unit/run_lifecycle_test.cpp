// The lifecycle Trainer and Finetuner share (run/run_lifecycle.h): a checkpoint save that
// fails as a full disk does says which step stopped, what survived and how to continue, and
// leaves the previous checkpoint loadable; the phases write the run directory only when opened
// (config.yaml after the task's header, metrics cut back to the resumed step) and resume from
// the newest checkpoint; the non-finite policy stops or skips by train.on_nonfinite and counts.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <limits>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/config/config_loader.h"
#include "roformer/io/checkpoint.h"
#include "roformer/run/run_lifecycle.h"
#include "test_support.h"

namespace run_lifecycle_test {

using namespace roformer;

std::string failed_save(const std::string& what, const std::string& run_dir, torch::nn::Module& model,
                        torch::optim::Optimizer& optimizer, const io::TrainerState& state,
                        const config::Config& config) {
  io::CheckpointFaults faults;
  faults.fail_at_step = state.step;
  faults.fail_file = "trainer.pt";
  try {
    run::save_checkpoint_or_explain(what, run_dir, model, optimizer, state, config, "abc", 2, faults);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

// A checkpoint loads under other kernels, evaluation-time methods and starting values (each
// family's runtime settings, from its row), and refuses a change to the trained function,
// naming the key.
TEST(RunLifecycle, ACheckpointLoadsUnderOtherRuntimeSettingsAndNamesAnOtherFunction) {
  config::Config rope;
  config::Config fire = rope, path = rope;
  fire.model.position.kind = config::PositionKind::fire;
  path.model.position.kind = config::PositionKind::path;
  auto difference = [](const config::Config& saved, const std::function<void(config::Config&)>& change) {
    config::Config current = saved;
    change(current);
    const auto d = io::first_architecture_difference(saved, current);
    return d ? d->key : std::string();
  };
  using config::Config;
  EXPECT_EQ(difference(rope, [](Config& c) { c.model.position.rope.impl = config::RopeKernel::reference; }), "");
  EXPECT_EQ(difference(rope, [](Config& c) { c.model.position.rope.cos_sin_table = false; }), "");
  EXPECT_EQ(difference(rope, [](Config& c) { c.model.position.rope.scaling.kind = config::RopeScalingKind::yarn; }),
            "");
  EXPECT_EQ(difference(rope, [](Config& c) { c.model.position.rope.mode = config::RopeMode::string; }), "");
  EXPECT_EQ(difference(rope, [](Config& c) { c.model.attention_kernel = config::AttentionKernel::reference; }), "");
  EXPECT_EQ(difference(fire, [](Config& c) { c.model.position.fire.l_init = 99; }), "");
  EXPECT_EQ(difference(path, [](Config& c) { c.model.position.path.block = 7; }), "");
  EXPECT_EQ(difference(rope, [](Config& c) { c.model.position.rope.base = 500; }), "model.position.rope.base");
  EXPECT_EQ(difference(fire, [](Config& c) { c.model.position.fire.mlp_width = 8; }), "model.position.fire.mlp_width");
  EXPECT_EQ(difference(path, [](Config& c) { c.model.position.path.rank = 8; }), "model.position.path.rank");
  EXPECT_EQ(difference(rope, [](Config& c) { c.model.position.fire.mlp_width = 8; }), "");  // an unused family's
}

TEST(RunLifecycle, AFailedSaveSaysWhatSurvivedAndHowToContinue) {
  roformer::testing::TempDir dir;
  torch::nn::Linear model(3, 2);
  torch::optim::AdamW optimizer(model->parameters());
  const config::Config cfg = config::load_overrides({}).config;
  io::TrainerState state;
  state.step = 5;
  const std::string first = failed_save("fine-tuning", dir.path(), *model, optimizer, state, cfg);
  EXPECT_NE(first.find("No space left on device"), std::string::npos) << first;
  EXPECT_NE(first.find("fine-tuning stopped at step 5; no checkpoint was written yet"), std::string::npos) << first;
  EXPECT_NE(first.find("continue with --resume auto"), std::string::npos) << first;
  EXPECT_FALSE(io::latest_checkpoint(dir.path()));

  run::save_checkpoint_or_explain("fine-tuning", dir.path(), *model, optimizer, state, cfg, "abc", 2);
  state.step = 10;
  const std::string second = failed_save("training", dir.path(), *model, optimizer, state, cfg);
  EXPECT_NE(second.find("training stopped at step 10; the previous checkpoint"), std::string::npos) << second;
  EXPECT_NE(second.find("step_5 is intact"), std::string::npos) << second;
  const auto latest = io::latest_checkpoint(dir.path());
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->step, 5);
}

run::StepResult step_with_loss(double loss) {
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  run::StepResult r;
  r.loss = torch::full({}, loss, f64);
  r.grad_norm = torch::full({}, 1.0, f64);
  r.found_inf = torch::full({}, std::isfinite(loss) ? 0.0f : 1.0f);
  return r;
}

TEST(RunLifecycle, PhasesWriteTheRunDirectoryOnlyWhenOpenedAndResumeFromTheNewestCheckpoint) {
  roformer::testing::TempDir dir;
  const std::string run = dir.path() + "/run";
  const dist::DistEnv env;
  const config::Config cfg = config::load_overrides({"name=lifecycle", "train.steps=8"}).config;
  torch::nn::Linear model(3, 2);
  torch::optim::AdamW optimizer(model->parameters());
  io::TrainerState state;
  {
    run::RunLifecycle life(cfg, env, run, "fine-tuning");
    life.claim_run_directory("");
    life.setup_device("");
    EXPECT_TRUE(life.resume_dir().empty());
    EXPECT_EQ(life.device(), torch::Device(torch::kCPU));
    EXPECT_FALSE(path_exists(run)) << "nothing is written before the directory is opened";
    life.open_run_directory("# pretrained encoder: E\n", 0);
    const std::string yaml = read_text_file(run + "/config.yaml");
    EXPECT_EQ(yaml.rfind("# git revision: ", 0), 0u) << yaml;
    EXPECT_NE(yaml.find("\n# pretrained encoder: E\nname: \"lifecycle\"\n"), std::string::npos) << yaml;
    for (int64_t s : {1, 2, 3}) life.metrics().write({{"type", "train"}, {"step", s}});
    state.step = 2;
    life.save_checkpoint(*model, optimizer, state);
    const run::RunEnd end = life.finish(0, 3);
    EXPECT_EQ(end.exit_code, 0);
    EXPECT_EQ(end.step, 3);
    EXPECT_EQ(end.run_dir, run);
  }
  run::RunLifecycle again(cfg, env, run, "fine-tuning");
  again.claim_run_directory("auto");
  again.setup_device("");
  EXPECT_EQ(again.resume_dir(), run + "/checkpoints/step_2");
  again.open_run_directory("", 2);
  const std::string metrics = read_text_file(run + "/metrics.jsonl");
  EXPECT_EQ(metrics.find("\"step\":3"), std::string::npos) << "records past the resumed step are dropped: " << metrics;
  EXPECT_NE(metrics.find("\"step\":2"), std::string::npos) << metrics;
  again.finish(0, 2);
}

TEST(RunLifecycle, NonFiniteStepsStopTheRunOrAreSkippedAndCounted) {
  const dist::DistEnv env;
  for (const std::string policy : {"stop", "skip"}) {
    const config::Config cfg = config::load_overrides({"train.on_nonfinite=" + policy}).config;
    run::RunLifecycle life(cfg, env, "", "training");
    life.setup_device("");
    life.begin_steps();
    life.record(step_with_loss(2.0), 0);
    EXPECT_FALSE(life.stop_on_nonfinite()) << policy;
    life.record(step_with_loss(std::nan("")), 1);
    life.record(step_with_loss(std::numeric_limits<double>::infinity()), 2);
    EXPECT_EQ(life.stop_on_nonfinite(), policy == "stop") << policy;
    EXPECT_EQ(life.skipped_steps(), 2) << policy;
    EXPECT_FALSE(life.stop_on_nonfinite()) << policy << ": steps already reported do not stop the run again";
    life.record(step_with_loss(std::nan("")), 3);
    EXPECT_EQ(life.stop_on_nonfinite(), policy == "stop") << policy;
    EXPECT_EQ(life.skipped_steps(), 3) << policy;
    EXPECT_EQ(life.run_dir(), "runs/" + cfg.name) << "no --run-dir: runs/NAME";
  }
}

}  // namespace run_lifecycle_test
