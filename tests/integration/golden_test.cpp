// The golden loss curve (torchtitan's loss-compare habit): 20 deterministic CPU steps of the
// tiny config (generated dataset, dropout on, one thread) must reproduce the committed
// trajectory -- step, loss, lr and gradient norm of every step, and the evaluation losses --
// digit for digit. A change that moves the numbers, even in the last bit, fails here and is
// either a bug or is regenerated on purpose: scripts/update_golden.sh (say why in the commit).
// The file is specific to this project's machine kind (x86-64 CPU kernels of LibTorch 2.11).
#include <gtest/gtest.h>

#include "test_support.h"

using namespace roformer::testing;

namespace {
const std::string kGolden = source_dir() + "/tests/golden/tiny_loss_curve.txt";
}

TEST(Golden, TwentyCpuStepsReproduceTheCommittedLossCurve) {
  TempDir dir;
  const std::string config = write_tiny_config(dir, make_word_dataset(dir));
  const std::string run = dir.file("run");
  const auto r = run_command("'" + roformer_binary() + "' train '" + config + "' --run-dir '" + run +
                             "' --set train.steps=20 --set train.log_every=1 --set train.eval_every=10");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string curve = metrics_trajectory(run);
  if (std::getenv("ROFORMER_UPDATE_GOLDEN")) {
    write_file(kGolden, curve);
    GTEST_SKIP() << "wrote " << kGolden;
  }
  EXPECT_EQ(curve, read_file(kGolden)) << "the loss curve moved; if on purpose, run scripts/update_golden.sh";
}
