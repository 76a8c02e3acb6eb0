// GPU (label gpu; skipped without a CUDA GPU): `roformer finetune` on CUDA. In fp32 with
// deterministic kernels the per-epoch dev losses follow the CPU run's; under bf16 autocast a
// run resumed from its epoch-1 checkpoint ends bitwise equal to the uninterrupted one (dropout
// on, so the CUDA generator's state must come back from the checkpoint).
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace finetune_cuda_test {

using namespace roformer::testing;
using nlohmann::json;

namespace {

std::string bin() {
  return "'" + roformer_binary() + "'";
}

json dev_losses(const std::string& run) {
  json out = json::array();
  for (const json& e : json::parse(read_file(run + "/results.json"))["dev"]) out.push_back(e["loss"]);
  return out;
}

}  // namespace

TEST(FinetuneCuda, Fp32FollowsTheCpuAndBf16ResumesExactly) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible";
  TempDir dir;
  const std::string cfg = write_tiny_config(dir, make_word_dataset(dir, 20000));
  auto r = run_command(bin() + " train '" + cfg + "' --run-dir '" + dir.file("pre") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string ckpt = dir.file("pre/checkpoints/step_40"), task = write_triplet_task(dir, "cross");
  auto finetune = [&](const std::string& run, const std::string& extra) {
    return run_command(bin() + " finetune '" + ckpt + "' '" + task + "' --run-dir '" + run + "' " + extra);
  };
  const std::string cuda = "--set train.device=cuda --set train.deterministic=true --set dist.backend=auto";
  ASSERT_EQ(finetune(dir.file("cpu"), "").exit_code, 0);
  r = finetune(dir.file("gpu32"), cuda + " --set train.precision=fp32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_NE(r.output.find("device cuda"), std::string::npos) << r.output;
  const json a = dev_losses(dir.file("cpu")), b = dev_losses(dir.file("gpu32"));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i].get<double>(), b[i].get<double>(), 2e-3) << "epoch " << i + 1;

  const std::string straight = dir.file("bf16"), resumed = dir.file("bf16-resumed");
  ASSERT_EQ(finetune(straight, cuda + " --set train.precision=bf16").exit_code, 0);
  ASSERT_EQ(run_command("mkdir -p '" + resumed + "/checkpoints' && cp -r '" + straight + "/checkpoints/step_8' '" +
                        resumed + "/checkpoints/' && cp '" + straight + "/metrics.jsonl' '" + resumed + "/'")
                .exit_code,
            0);
  r = finetune(resumed, cuda + " --set train.precision=bf16 --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(safetensors_difference(straight + "/checkpoints/step_24/model.safetensors",
                                   resumed + "/checkpoints/step_24/model.safetensors"),
            "");
}

}  // namespace finetune_cuda_test
