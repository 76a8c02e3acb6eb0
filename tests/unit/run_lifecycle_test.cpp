// The phases Trainer and Finetuner share (train/run_lifecycle.h): a checkpoint save that fails
// as a full disk does says which step stopped, what survived and how to continue, and leaves
// the previous checkpoint loadable.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "roformer/common/errors.h"
#include "roformer/config/config_loader.h"
#include "roformer/io/checkpoint.h"
#include "roformer/train/run_lifecycle.h"
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
    train::save_checkpoint_or_explain(what, run_dir, model, optimizer, state, config, "abc", 2, faults);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
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

  train::save_checkpoint_or_explain("fine-tuning", dir.path(), *model, optimizer, state, cfg, "abc", 2);
  state.step = 10;
  const std::string second = failed_save("training", dir.path(), *model, optimizer, state, cfg);
  EXPECT_NE(second.find("training stopped at step 10; the previous checkpoint"), std::string::npos) << second;
  EXPECT_NE(second.find("step_5 is intact"), std::string::npos) << second;
  const auto latest = io::latest_checkpoint(dir.path());
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->step, 5);
}

}  // namespace run_lifecycle_test
