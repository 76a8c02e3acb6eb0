// GPU (label gpu; skipped without a CUDA GPU): `roformer train` on CUDA resumes exactly.
// Training N steps straight and N/2 + resume -- also after SIGKILLs -- gives bitwise-equal
// weights and loss curves in fp32 and under bf16 autocast, with dropout on (its state is the
// CUDA generator's, saved in trainer.pt) and train.deterministic on (no atomics in kernels).
// The negative control (the RNG state not restored) must diverge, so the check can fail. CUDA
// graphs follow the eager curve, and so does a run whose capture fails. Also evaluation on
// CUDA: bf16 against fp32, and the bias families at 16k tokens in query blocks.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "test_support.h"

namespace train_cuda_test {

using namespace roformer::testing;

namespace {

struct CudaFixture {
  TempDir dir;
  std::string dataset, config;
  CudaFixture() : dataset(make_word_dataset(dir)), config(write_tiny_config(dir, dataset)) {}
  CommandResult train(const std::string& run, const std::string& precision, const std::string& extra = "",
                      const std::string& env = "") const {
    return run_command(env + " '" + roformer_binary() + "' train '" + config + "' --run-dir '" + run +
                       "' --set train.device=cuda --set dist.backend=auto --set train.deterministic=true" +
                       " --set train.precision=" + precision + " " + extra);
  }
};

// The two runs logged the same steps, with losses within 1e-3 relative of each other.
void expect_same_loss_curve(const std::string& run_a, const std::string& run_b) {
  const auto a = metric_records(run_a, "train"), b = metric_records(run_b, "train");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]["step"], b[i]["step"]);
    EXPECT_NEAR(a[i]["loss"].get<double>(), b[i]["loss"].get<double>(), 1e-3 * a[i]["loss"].get<double>())
        << "step " << a[i]["step"];
  }
}

}  // namespace

class TrainCuda : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible";
  }
};

TEST_P(TrainCuda, ResumeIsBitwiseIdenticalAndTheNegativeControlDiverges) {
  CudaFixture f;
  const std::string straight = f.dir.file("straight"), resumed = f.dir.file("resumed"), control = f.dir.file("control");
  auto r = f.train(straight, GetParam());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_NE(r.output.find("device cuda"), std::string::npos) << r.output;
  ASSERT_EQ(f.train(resumed, GetParam(), "--set train.checkpoint_every=20").exit_code, 0);
  ASSERT_EQ(run_command("rm -rf '" + resumed + "/checkpoints/step_40'").exit_code, 0);
  r = f.train(resumed, GetParam(), "--resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(safetensors_difference(checkpoint_weights(straight, 40), checkpoint_weights(resumed, 40)), "");
  EXPECT_EQ(metrics_trajectory(straight), metrics_trajectory(resumed));
  ASSERT_EQ(f.train(control, GetParam(), "--set train.checkpoint_every=20").exit_code, 0);
  ASSERT_EQ(run_command("rm -rf '" + control + "/checkpoints/step_40'").exit_code, 0);
  ASSERT_EQ(f.train(control, GetParam(), "--resume auto", "ROFORMER_FAULT_SKIP_RNG_RESTORE=1").exit_code, 0);
  EXPECT_NE(safetensors_difference(checkpoint_weights(straight, 40), checkpoint_weights(control, 40)), "");
}

TEST_P(TrainCuda, KilledRunsResumeToTheSameResult) {
  CudaFixture f;
  const std::string straight = f.dir.file("straight"), killed = f.dir.file("killed");
  const std::string longer = "--set train.steps=120 --set train.checkpoint_every=10";
  ASSERT_EQ(f.train(straight, GetParam(), longer).exit_code, 0);
  std::mt19937 rng(11);
  for (int attempt = 0; attempt < 3; ++attempt) {
    const double seconds = 3.0 + 3.0 * std::uniform_real_distribution<double>(0, 1)(rng);  // CUDA start-up is slow
    const auto r = run_command(
        "timeout -s KILL " + std::to_string(seconds) + " '" + roformer_binary() + "' train '" + f.config +
        "' --run-dir '" + killed + "' --set train.device=cuda --set dist.backend=auto" +
        " --set train.deterministic=true --set train.precision=" + GetParam() + " " + longer + " --resume auto");
    if (r.exit_code == 0) break;
    EXPECT_EQ(r.exit_code, 137) << r.output;
  }
  const auto r = f.train(killed, GetParam(), longer + " --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(safetensors_difference(checkpoint_weights(straight, 120), checkpoint_weights(killed, 120)), "");
  EXPECT_EQ(metrics_trajectory(straight), metrics_trajectory(killed));
}

INSTANTIATE_TEST_SUITE_P(Precisions, TrainCuda, ::testing::Values("fp32", "bf16"));

// The whole step captured as a CUDA graph gives the eager loss curve (to rounding: the graph
// pads the scored positions to a fixed capacity, which reorders one sum), with dropout on.
TEST_P(TrainCuda, GraphedStepsFollowTheEagerLossCurve) {
  CudaFixture f;
  const std::string eager = f.dir.file("eager"), graphed = f.dir.file("graphed");
  auto r = f.train(eager, GetParam(), "--set train.cuda_graphs=off");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = f.train(graphed, GetParam(), "--set train.cuda_graphs=on");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("CUDA graph captured"), std::string::npos) << r.output;
  expect_same_loss_curve(eager, graphed);
}

// train.activation_checkpointing on CUDA: the recomputation sets the CUDA generator back (dropout
// draws the same masks) and re-enters bf16 autocast, so every layer checkpointed ends bitwise
// where the unchecked run ends, both eager and deterministic.
TEST_P(TrainCuda, ActivationCheckpointingTrainsBitwiseLikeTheUncheckedRun) {
  CudaFixture f;
  const std::string plain = f.dir.file("plain"), layers = f.dir.file("layers");
  const std::string common =
      "--set model.num_layers=3 --set model.attention_dropout=0.1 --set train.cuda_graphs=off --set train.steps=20 ";
  auto r = f.train(plain, GetParam(), common);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = f.train(layers, GetParam(), common + "--set train.activation_checkpointing=layers");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(safetensors_difference(checkpoint_weights(plain, 20), checkpoint_weights(layers, 20)), "");
  EXPECT_EQ(metrics_trajectory(plain), metrics_trajectory(layers));
}

// A step that cannot be captured (fault injection: the step reads a device value on the host)
// logs why and the run goes on with eager steps on the eager loss curve. The failed capture
// must be ended and its memory pool handed back: an open global-mode capture forbids
// cudaMalloc in every thread, so the eager steps after it would fail.
TEST_P(TrainCuda, FailedCaptureFallsBackToEagerStepsOnTheEagerCurve) {
  CudaFixture f;
  const std::string eager = f.dir.file("eager"), fallback = f.dir.file("fallback");
  auto r = f.train(eager, GetParam(), "--set train.cuda_graphs=off");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = f.train(fallback, GetParam(), "--set train.cuda_graphs=on", "ROFORMER_FAULT_UNCAPTURABLE_STEP=1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("CUDA graph capture failed"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("CUDA graph captured"), std::string::npos) << r.output;
  expect_same_loss_curve(eager, fallback);
}

// Randomized positions (train.positions: random) on CUDA: the explicit [B, S] positions reach the
// fused RoPE op past its cached table, the step runs eagerly (graphs hold no positions), and the
// fp32 loss curve follows the CPU's (dropout and TF32 off).
TEST(TrainCudaFamilies, RandomPositionsFollowTheCpuCurve) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible";
  CudaFixture f;
  const std::string sets =
      "--set train.positions=random --set train.random_positions_max=300 "
      "--set model.hidden_dropout=0 --set model.attention_dropout=0 --set train.tf32=false";
  const std::string cpu = f.dir.file("cpu"), gpu = f.dir.file("gpu");
  auto r = run_command("'" + roformer_binary() + "' train '" + f.config + "' --run-dir '" + cpu + "' " + sets);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = f.train(gpu, "fp32", sets);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("train.positions=random"), std::string::npos) << r.output;  // why the graph is off
  expect_same_loss_curve(cpu, gpu);
}

// Document packing on CUDA: the document mask and per-document positions reach the GPU's
// attention (SDPA with the mask; FIRE's per-row bias), the step runs eagerly (graphs hold no
// segments), and the fp32 loss curve follows the CPU's for RoPE and FIRE.
TEST(TrainCudaFamilies, DocumentPackingFollowsTheCpuCurve) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible";
  CudaFixture f;
  const std::string dataset = make_document_dataset(f.dir);
  for (const char* kind : {"rope", "fire"}) {
    SCOPED_TRACE(kind);
    const std::string sets = "--set data.path=" + dataset +
                             " --set data.packing=documents --set model.position.kind=" + kind +
                             " --set model.hidden_dropout=0 --set model.attention_dropout=0 --set train.tf32=false";
    const std::string cpu = f.dir.file(std::string("cpu-") + kind), gpu = f.dir.file(std::string("gpu-") + kind);
    auto r = run_command("'" + roformer_binary() + "' train '" + f.config + "' --run-dir '" + cpu + "' " + sets);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = f.train(gpu, "fp32", sets);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("data.packing: the graph's"), std::string::npos) << r.output;  // why the graph is off
    expect_same_loss_curve(cpu, gpu);
  }
}

// Evaluation under bf16 autocast (eval.precision auto on CUDA) stays within 1 % perplexity of
// fp32 on the same checkpoint, and the report says which precision ran.
TEST(EvalCuda, Bf16PerplexityIsWithinOnePercentOfFp32) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible";
  CudaFixture f;
  const std::string run = f.dir.file("run");
  ASSERT_EQ(f.train(run, "fp32").exit_code, 0);
  auto eval = [&](const std::string& precision) {
    const std::string out = f.dir.file("eval-" + precision);
    const auto r =
        run_command("'" + roformer_binary() + "' eval '" + run + "/checkpoints/step_40' --lengths 32,128 --out '" +
                    out + "' --set train.device=cuda --set eval.precision=" + precision);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return nlohmann::json::parse(read_file(out + "/eval.json"));
  };
  const auto fp32 = eval("fp32"), bf16 = eval("bf16");
  EXPECT_EQ(fp32["precision"], "fp32");
  EXPECT_EQ(bf16["precision"], "bf16");
  // The fixture trains with train.deterministic, which leaves SDPA only its math kernel; bf16
  // evaluation (no mask: RoPE, MLM) runs flash attention or cuDNN's.
  EXPECT_NE(read_file(run + "/train.log").find("attention kernel: sdpa-math"), std::string::npos);
  for (const auto& r : bf16["results"])
    EXPECT_TRUE(r["attention"] == "sdpa-flash" || r["attention"] == "sdpa-cudnn") << r.dump();
  for (size_t i = 0; i < 2; ++i) {
    const double a = fp32["results"][i]["ppl"].get<double>(), b = bf16["results"][i]["ppl"].get<double>();
    EXPECT_NEAR(b, a, 0.01 * a) << "length " << fp32["results"][i]["length"];
    EXPECT_GT(bf16["results"][i]["peak_mem_gib"].get<double>(), 0.0);  // device memory is reported on CUDA
  }
}

namespace {

// `family` (--set arguments) trained on the CPU and on CUDA in fp32 without graphs gives the same
// loss curve; in bf16 with CUDA graphs on, the step is captured and every loss is finite.
void follows_the_cpu_and_captures_in_bf16(const CudaFixture& f, const std::string& name, const std::string& family) {
  const std::string cpu = f.dir.file(name + "-cpu"), gpu = f.dir.file(name + "-gpu"), bf16 = f.dir.file(name + "-bf16");
  auto r = run_command("'" + roformer_binary() + "' train '" + f.config + "' --run-dir '" + cpu + "' " + family);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = f.train(gpu, "fp32", family + " --set train.cuda_graphs=off");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_loss_curve(cpu, gpu);
  r = f.train(bf16, "bf16", family + " --set train.cuda_graphs=on");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("CUDA graph captured"), std::string::npos) << r.output;
  for (const auto& m : metric_records(bf16, "train")) EXPECT_TRUE(std::isfinite(m["loss"].get<double>()));
}

}  // namespace

// The relative families whose scores attention forms itself (Shaw, Transformer-XL, DeBERTa,
// FIRE, CoPE), xPos, KERPLE and Sandwich: on CUDA in fp32 (TF32 off, dropout off) the loss curve follows the CPU's, and
// under bf16 autocast with CUDA graphs on the step is captured and the loss stays finite.
TEST(TrainCudaFamilies, RelativeFamiliesFollowTheCpuCurveAndCaptureInBf16) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible";
  CudaFixture f;
  // The 2022-2024 families too (issue 36): KERPLE's in-place clamp and FIRE's MLP inside the
  // captured graph, CoPE's gates from bf16 scores (causal: CoPE's only objective).
  for (const std::string kind : {"shaw", "transformer_xl", "deberta", "xpos", "fire", "kerple", "sandwich", "cope"}) {
    SCOPED_TRACE(kind);
    const std::string family = "--set model.position.kind=" + kind +
                               (kind == "cope" ? " --set model.objective=causal_lm" : "") +
                               " --set model.hidden_dropout=0 --set model.attention_dropout=0 --set train.tf32=false";
    follows_the_cpu_and_captures_in_bf16(f, kind, family);
  }
}

// ALiBi and T5 at a length whose whole [1, H, S, S] mask is past the 512 MiB limit (16384 tokens,
// 2 heads: 1 GiB in bf16, and the previous code kept a 4 GiB float64 copy besides): attention
// takes the queries in blocks, so the device's peak stays far below the whole mask, and the bf16
// perplexity stays within 1 % of the CPU's fp32 on the same checkpoint. DeBERTa forms its scores
// (2 GiB whole in fp32) in blocks of 128 MiB, a few of which are alive at once: under 1 GiB.
// The methods of 2025 the same way: FoX (its gates from the layer input), FoX's Pro options with
// SSMax, stick-breaking over RoPE and Llama 4's temperature, all causal: fp32 on CUDA follows the
// CPU's curve, and bf16 with CUDA graphs captures the step with finite losses.
TEST(TrainCudaFamilies, Methods2025FollowTheCpuCurveAndCaptureInBf16) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible";
  CudaFixture f;
  const std::vector<std::pair<std::string, std::string>> methods{
      {"fox", "--set model.position.kind=fox"},
      {"fox-pro-ssmax",
       "--set model.position.kind=fox --set model.qk_norm=true --set model.output_gate=true "
       "--set model.attention_scale=ssmax"},
      {"stick-breaking", "--set model.position.kind=rope --set model.attention_normalizer=stick_breaking"},
      {"llama4",
       "--set model.position.kind=none --set model.attention_scale=llama4 "
       "--set model.attention_scale_floor=8"},
      {"path", "--set model.position.kind=path --set model.position.path.forget_gate=true"},
      {"irope-layout",
       "--set model.position.kind=rope --set model.layout.preset=custom --set model.layout.pattern=LG "
       "--set model.layout.local.window_kind=chunked --set model.layout.local.window=8 "
       "--set model.layout.global.position=none --set model.layout.global.temperature=llama4 "
       "--set model.attention_scale_floor=8"}};
  for (const auto& [name, args] : methods) {
    SCOPED_TRACE(name);
    const std::string family = args +
                               " --set model.objective=causal_lm --set model.hidden_dropout=0 "
                               "--set model.attention_dropout=0 --set train.tf32=false";
    follows_the_cpu_and_captures_in_bf16(f, name, family);
  }
}

TEST(EvalCuda, BiasFamiliesEvaluateLongLengthsInQueryBlocks) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible";
  TempDir dir;
  const std::string config = write_tiny_config(dir, make_word_dataset(dir, 200000));  // valid: 20,000 tokens
  // Shaw's value term at 8192+ tokens once failed under autocast only (its sums came back fp32).
  for (const std::string kind : {"alibi", "t5_bias", "deberta", "shaw", "transformer_xl", "fire", "kerple", "fox"}) {
    SCOPED_TRACE(kind);
    // alibi, t5_bias: 0.54 GiB measured on an H200 (2026-11-26), against 1 GiB for the whole mask alone.
    const double peak_limit_gib = kind == "alibi" || kind == "t5_bias" ? 0.75 : 1.0;
    const std::string run = dir.file(kind);
    auto r = run_command("'" + roformer_binary() + "' train '" + config + "' --run-dir '" + run +
                         "' --set model.position.kind=" + kind);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto eval = [&](const std::string& device) {
      const std::string out = dir.file(kind + "-" + device);
      r = run_command("'" + roformer_binary() + "' eval '" + run + "/checkpoints/step_40' --lengths 16384 " +
                      "--protocol chunks --set eval.max_tokens=16384 --set eval.batch_size=1 --out '" + out +
                      "' --set train.device=" + device);
      EXPECT_EQ(r.exit_code, 0) << r.output;
      return nlohmann::json::parse(read_file(out + "/eval.json"))["results"][0];
    };
    const auto cpu = eval("cpu"), gpu = eval("cuda");
    EXPECT_NEAR(gpu["ppl"].get<double>(), cpu["ppl"].get<double>(), 0.01 * cpu["ppl"].get<double>());
    EXPECT_LT(gpu["peak_mem_gib"].get<double>(), peak_limit_gib);
  }
}

// A synthetic task on CUDA: at one length the whole step is captured (the answers fill the
// scored capacity), and the graphed run follows the CPU's fp32 loss curve; with a length
// curriculum the step runs eagerly and says why; the task checkpoint evaluates on CUDA.
TEST(TrainCudaTasks, ATaskTrainsGraphedAtOneLengthAndEagerlyOverACurriculum) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible";
  TempDir dir;
  const std::string config = source_dir() + "/configs/tasks/copy.yaml";
  const std::string tiny =
      " --set train.steps=40 --set train.checkpoint_every=40 --set train.eval_every=40 "
      "--set data.task.eval_examples=32 --set train.precision=fp32 --set train.deterministic=true ";
  auto train = [&](const std::string& name, const std::string& device, const std::string& extra) {
    const auto r = run_command("'" + roformer_binary() + "' train '" + config + "' --run-dir '" + dir.file(name) +
                               "' --set train.device=" + device + tiny + extra);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.output;
  };
  const std::string graphed = train("graphed", "cuda", "--set data.task.min_length=0");
  EXPECT_NE(graphed.find("CUDA graphs: the whole step is captured"), std::string::npos) << graphed;
  train("cpu", "cpu", "--set data.task.min_length=0");
  expect_same_loss_curve(dir.file("cpu"), dir.file("graphed"));
  const std::string curriculum = train("curriculum", "cuda", "");
  EXPECT_NE(curriculum.find("data.task.min_length: the sequence length changes"), std::string::npos) << curriculum;
  const auto r = run_command("'" + roformer_binary() + "' eval '" + dir.file("curriculum") +
                             "/checkpoints/step_40' --lengths 64,256 --set train.device=cuda");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("task copy"), std::string::npos) << r.output;
}

}  // namespace train_cuda_test
