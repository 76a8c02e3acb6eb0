// `roformer eval` and `roformer sweep` end to end on a tiny trained checkpoint: evaluation at
// the training length equals the trainer's own validation loss; the chunks protocol scores
// every token once; sliding with stride L equals chunks; RoPE scaling changes results only
// where it should; learned positions past their table are reported as not applicable; a
// sweep resumes without retraining and its report carries the expected tables.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "roformer/common/files.h"
#include "test_support.h"

namespace eval_test {

using namespace roformer::testing;
using nlohmann::json;

namespace {

struct Trained {
  TempDir dir;
  std::string dataset, config, run, checkpoint;
  explicit Trained(const std::string& objective, const std::string& extra = "") {
    dataset = make_word_dataset(dir);
    config = write_tiny_config(dir, dataset, objective);
    run = dir.file("run");
    const auto r = run_command("'" + roformer_binary() + "' train '" + config + "' --run-dir '" + run + "' " + extra);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    checkpoint = run + "/checkpoints/step_40";
  }
  json eval(const std::string& args) const {
    const std::string out = dir.file("eval_out");
    const auto r = run_command("'" + roformer_binary() + "' eval '" + checkpoint + "' --out '" + out + "' " + args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return json::parse(read_file(out + "/eval.json"));
  }
};

double last_valid_loss(const std::string& run) {
  std::istringstream in(read_file(run + "/metrics.jsonl"));
  std::string line;
  double loss = 0;
  while (std::getline(in, line))
    if (!line.empty() && json::parse(line)["type"] == "eval") loss = json::parse(line)["loss"].get<double>();
  return loss;
}

// The training losses metrics.jsonl recorded, in order.
std::vector<double> train_losses(const std::string& run) {
  std::istringstream in(read_file(run + "/metrics.jsonl"));
  std::string line;
  std::vector<double> losses;
  while (std::getline(in, line))
    if (!line.empty() && json::parse(line)["type"] == "train")
      losses.push_back(json::parse(line)["loss"].get<double>());
  return losses;
}

// The run's training loss fell, `eval` at 1x reproduces its last validation loss and 4x gives a
// finite loss; returns the evaluation (1x, 4x).
// A family's evaluation at 4x through a fused kernel (tile attention, or CoPE's term in the short
// kernel) equals the explicit scores' (`--set model.attention_kernel=reference` on the same
// checkpoint: a kernel choice, not architecture).
void expect_tiles_equal_the_reference(const Trained& t, const json& tiled) {
  const json reference = t.eval(
      "--lengths 32,128 --set eval.max_tokens=512 --set eval.batch_size=8 --set model.attention_kernel=reference");
  EXPECT_NE(reference["results"][1]["attention"], "tile-attention");  // FIRE: its bias as SDPA's mask
  EXPECT_NE(reference["results"][1]["attention"], "short-attention");
  EXPECT_NEAR(reference["results"][1]["loss"].get<double>(), tiled["results"][1]["loss"].get<double>(), 1e-5);
}

json expect_trains_and_evaluates_at_4x(const Trained& t) {
  const std::vector<double> losses = train_losses(t.run);
  EXPECT_GE(losses.size(), 2u);
  if (losses.size() >= 2) {
    EXPECT_LT(losses.back(), losses.front() - 0.3);
  }
  const json j = t.eval("--lengths 32,128 --set eval.max_tokens=512 --set eval.batch_size=8");
  EXPECT_NEAR(j["results"][0]["loss"].get<double>(), last_valid_loss(t.run), 1e-9);
  const double at4x = j["results"][1]["loss"].get<double>();
  EXPECT_TRUE(std::isfinite(at4x) && at4x > 0) << j.dump();
  return j;
}

}  // namespace

TEST(Eval, AtTheTrainingLengthEqualsTheTrainersValidationLoss) {
  for (const std::string objective : {"mlm", "causal_lm"}) {
    Trained t(objective);
    // The trainer scores eval_batches x batch_size windows of length 32: 2 * 8 * 32 tokens.
    const json j = t.eval("--lengths 32 --set eval.max_tokens=512 --set eval.batch_size=8");
    EXPECT_NEAR(j["results"][0]["loss"].get<double>(), last_valid_loss(t.run), 1e-9) << objective;
  }
}

TEST(Eval, ReportsItsPrecisionAndTheCpuEvaluatesInFp32UnlessAskedForBf16) {
  Trained t("causal_lm");
  const json j = t.eval("--lengths 32,64");
  EXPECT_EQ(j["precision"], "fp32");
  for (const json& r : j["results"]) {  // the cost of each length: wall time, and device memory (none on the CPU)
    EXPECT_GT(r["seconds"].get<double>(), 0.0);
    EXPECT_EQ(r["peak_mem_gib"].get<double>(), 0.0);
    // The attention kernel that ran: ops/short_attention, which auto picks on the CPU for causal
    // lengths up to 512 (LibTorch's flash kernel past that; model.attention_kernel).
    EXPECT_EQ(r["attention"], "short-attention");
  }
  // Training says the same for its first step.
  EXPECT_NE(read_file(t.run + "/train.log").find("attention kernel: short-attention"), std::string::npos);
  const std::string csv = read_file(t.dir.file("eval_out") + "/eval.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "position,scaling,protocol,length,applicable,loss,ppl,accuracy,tokens,seconds,peak_mem_gib,task,exact_"
            "match,size");
  // The CPU evaluates in bf16 when asked (autocast; the attention then through LibTorch's SDPA),
  // within bf16's rounding of the fp32 loss.
  const json fp32 = t.eval("--lengths 32")["results"][0];
  const json bf16 = t.eval("--lengths 32 --set eval.precision=bf16");
  EXPECT_EQ(bf16["precision"], "bf16");
  EXPECT_EQ(bf16["results"][0]["attention"], "sdpa-flash");
  EXPECT_NEAR(bf16["results"][0]["loss"].get<double>(), fp32["loss"].get<double>(), 0.01 * fp32["loss"].get<double>());
  EXPECT_NE(bf16["results"][0]["loss"].get<double>(), fp32["loss"].get<double>());
}

// --per-token: the loss at every position, token-weighted, rebuilds the 8 buckets of the
// default run, and its cumulative mean ends at the whole length's loss.
TEST(Eval, PerTokenLossRebuildsTheBucketsAndEndsAtTheLoss) {
  Trained t("causal_lm");
  const json buckets = t.eval("--lengths 32 --set eval.max_tokens=0")["results"][0];
  const json each = t.eval("--lengths 32 --set eval.max_tokens=0 --per-token")["results"][0];
  const std::vector<double> by_position = each["loss_by_position"], cumulative = each["cumulative_loss"];
  ASSERT_EQ(by_position.size(), 32u);
  ASSERT_EQ(cumulative.size(), 32u);
  EXPECT_FALSE(buckets.contains("cumulative_loss"));
  // Every position holds the same number of windows under chunks, so a bucket is a plain mean.
  for (int k = 0; k < 8; ++k) {
    double sum = 0;
    for (int p = 4 * k; p < 4 * k + 4; ++p) sum += by_position[static_cast<size_t>(p)];
    EXPECT_NEAR(sum / 4, buckets["loss_by_position"][k].get<double>(), 0.02) << "bucket " << k;
  }
  EXPECT_NEAR(cumulative.back(), each["loss"].get<double>(), 1e-9);
  EXPECT_NEAR(cumulative.front(), by_position.front(), 1e-12);
}

// The header names every method evaluation applies, and a RoPE method on a family it cannot
// change is named as such and warned about; a run directory stands for its newest checkpoint.
TEST(Eval, HeadersNameEveryMethodAndRunDirectoriesMeanTheirNewestCheckpoint) {
  Trained alibi("causal_lm", "--set model.position.kind=alibi");
  const std::string bin = "'" + roformer_binary() + "' eval ";
  auto r = run_command(bin + "'" + alibi.checkpoint + "' --lengths 64 --set model.position.rope.scaling.kind=yarn " +
                       "--set model.position.rope.scaling.factor=8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("alibi (methods: yarn x8 (no effect on alibi))"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("does nothing for position kind alibi"), std::string::npos) << r.output;
  Trained rope("causal_lm");
  r = run_command(bin + "'" + rope.checkpoint + "' --lengths 64 --set model.position.rope.mode=rerope " +
                  "--set model.position.rope.rerope.window=8 --set model.attention_scale=logn_past_training");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rope (methods: rerope window 8, log-n past 32)"), std::string::npos) << r.output;
  const json by_checkpoint = rope.eval("--lengths 64");
  r = run_command(bin + "'" + rope.run + "' --lengths 64 --out '" + rope.dir.file("by_run") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("is a run directory; using its newest complete checkpoint " + rope.checkpoint),
            std::string::npos)
      << r.output;
  const json by_run = json::parse(read_file(rope.dir.file("by_run") + "/eval.json"));
  EXPECT_EQ(by_run["results"][0]["loss"], by_checkpoint["results"][0]["loss"]);
  EXPECT_EQ(by_run["methods"], "none");
}

TEST(Eval, ProtocolsAndScalingBehaveAsDefined) {
  Trained t("causal_lm");
  const json chunks = t.eval("--lengths 32,64 --set eval.max_tokens=0");
  EXPECT_EQ(chunks["results"][0]["tokens"].get<int64_t>(), 3999);  // every target of the 4000-token split once
  EXPECT_EQ(chunks["results"][1]["tokens"].get<int64_t>(), 3999);
  const json sliding_l = t.eval("--lengths 32,64 --protocol sliding --stride 32 --set eval.max_tokens=0");
  EXPECT_DOUBLE_EQ(sliding_l["results"][0]["loss"].get<double>(), chunks["results"][0]["loss"].get<double>());
  const json sliding = t.eval("--lengths 64 --protocol sliding --stride 16 --set eval.max_tokens=0");
  EXPECT_EQ(sliding["results"][0]["tokens"].get<int64_t>(), 3999);
  // Linear scaling with factor 1 is no scaling; dynamic NTK changes nothing up to the training
  // length and something beyond it.
  const json linear1 = t.eval(
      "--lengths 32,64 --set eval.max_tokens=0 --set model.position.rope.scaling.kind=linear "
      "--set model.position.rope.scaling.factor=1");
  EXPECT_EQ(linear1["results"][0]["loss"], chunks["results"][0]["loss"]);
  EXPECT_EQ(linear1["results"][1]["loss"], chunks["results"][1]["loss"]);
  const json dynamic =
      t.eval("--lengths 32,64 --set eval.max_tokens=0 --set model.position.rope.scaling.kind=dynamic_ntk");
  EXPECT_EQ(dynamic["results"][0]["loss"], chunks["results"][0]["loss"]);
  EXPECT_NE(dynamic["results"][1]["loss"], chunks["results"][1]["loss"]);
  // The bias + GELU kernel is a runtime key: the reference kernel evaluates the same checkpoint
  // to float rounding (the fused one ran above, the CPU's default).
  const json reference = t.eval("--lengths 32,64 --set eval.max_tokens=0 --set model.activation_kernel=reference");
  for (int i : {0, 1})
    EXPECT_NEAR(reference["results"][i]["loss"].get<double>(), chunks["results"][i]["loss"].get<double>(),
                1e-5 * chunks["results"][i]["loss"].get<double>());
  // Architecture overrides are refused at evaluation time.
  const auto r = run_command("'" + roformer_binary() + "' eval '" + t.checkpoint + "' --set model.num_layers=3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("model.num_layers"), std::string::npos) << r.output;
}

TEST(Eval, PasskeyRetrievalRunsOnACausalCheckpoint) {
  Trained t("causal_lm");
  const std::string out = t.dir.file("pk");
  const auto r = run_command("'" + roformer_binary() + "' eval '" + t.checkpoint +
                             "' --passkey --lengths 128,256 "
                             "--depths 0,0.5 --trials 2 --out '" +
                             out + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = json::parse(read_file(out + "/passkey.json"));
  ASSERT_EQ(j["cells"].size(), 4u);
  for (const json& cell : j["cells"]) EXPECT_EQ(cell["trials"].get<int64_t>(), 2);
  const auto bad = run_command("'" + roformer_binary() + "' eval '" + t.checkpoint + "' --passkey --depths 2");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("outside [0, 1]"), std::string::npos) << bad.output;
}

TEST(Eval, LearnedPositionsPastTheTableAreNotApplicable) {
  Trained t("causal_lm", "--set model.position.kind=learned --set model.position.max_positions=48");
  const json j = t.eval("--lengths 32,64");
  EXPECT_TRUE(j["results"][0]["applicable"].get<bool>());
  EXPECT_FALSE(j["results"][1]["applicable"].get<bool>());
  EXPECT_NE(j["results"][1]["reason"].get<std::string>().find("48"), std::string::npos);
}

TEST(Sweep, ResumesWithoutRetrainingAndReportsEveryVariant) {
  TempDir dir;
  const std::string ds = make_word_dataset(dir);
  const std::string cfg = write_tiny_config(dir, ds, "causal_lm");
  write_file(dir.file("sweep.yaml"),
             "name: tiny\nconfig: tiny.yaml\nset: [\"train.steps=20\", \"train.checkpoint_every=20\"]\nseeds: [1, 2]\n"
             "variants:\n  - {name: rope, set: [\"model.position.kind=rope\"]}\n"
             "  - {name: alibi, set: [\"model.position.kind=alibi\"]}\n"
             "eval:\n  lengths: [32, 64]\n  protocols: [chunks, sliding]\n  max_tokens: 1000\n"
             "  scaling:\n    - {name: yarn-2, set: [\"model.position.rope.scaling.kind=yarn\", "
             "\"model.position.rope.scaling.factor=2\"]}\n");
  const std::string out = dir.file("out");
  auto r = run_command("'" + roformer_binary() + "' sweep '" + dir.file("sweep.yaml") + "' --out '" + out + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // stdout (the tables) and stderr (the log) share the pipe in order: the first run's table
  // comes before the second run starts, not at the end of the sweep.
  EXPECT_LT(r.output.find("rope (methods: none), chunks protocol"), r.output.find("[2/4] rope-seed2")) << r.output;
  const std::string report = read_file(out + "/report.md");
  for (const std::string fragment :
       {"| rope |", "| alibi |", "chunks protocol", "sliding protocol", "| rope | yarn-2 |", "## In-distribution"})
    EXPECT_NE(report.find(fragment), std::string::npos) << fragment << "\n" << report;
  EXPECT_TRUE(roformer::path_exists(out + "/runs/alibi-seed2/eval/sliding.json"));
  EXPECT_FALSE(roformer::path_exists(out + "/runs/alibi-seed2/eval/chunks-yarn-2.json"));  // scaling is for rope only
  const std::string before = read_file(out + "/runs/rope-seed1/checkpoints/step_20/model.safetensors");
  r = run_command("'" + roformer_binary() + "' sweep '" + dir.file("sweep.yaml") + "' --out '" + out + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rope-seed1: trained and evaluated, skipping"), std::string::npos) << r.output;
  EXPECT_TRUE(read_file(out + "/runs/rope-seed1/checkpoints/step_20/model.safetensors") == before) << "rewritten";
  // A finished run without its checkpoints (deleted to save disk) is still finished.
  std::filesystem::remove_all(out + "/runs/alibi-seed1/checkpoints");
  // --record keeps each finished run's small files and the report in a folder to commit; a fresh
  // output folder takes the recorded runs from there instead of training them.
  const std::string record = dir.file("record");
  const std::string sweep = "'" + roformer_binary() + "' sweep '" + dir.file("sweep.yaml") + "' --record '" + record;
  r = run_command(sweep + "' --out '" + out + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find(": training"), std::string::npos) << r.output;
  for (const char* f : {"report.md", "runs/rope-seed2/metrics.jsonl", "runs/rope-seed2/config.yaml",
                        "runs/rope-seed2/eval/chunks-yarn-2.json", "runs/alibi-seed1/eval/sliding.json"})
    EXPECT_TRUE(roformer::path_exists(record + "/" + f)) << f;
  EXPECT_FALSE(roformer::path_exists(record + "/runs/rope-seed1/checkpoints"));
  const std::string fresh = dir.file("fresh");
  r = run_command(sweep + "' --out '" + fresh + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[4/4] alibi-seed2: finished in"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(": training"), std::string::npos) << r.output;
  EXPECT_FALSE(roformer::path_exists(fresh + "/runs/rope-seed1/checkpoints"));
  EXPECT_EQ(read_file(fresh + "/runs/rope-seed1/eval/chunks-yarn-2.json"),
            read_file(out + "/runs/rope-seed1/eval/chunks-yarn-2.json"));
  const std::string table = "## In-distribution";
  const std::string a = read_file(out + "/report.md"), b = read_file(fresh + "/report.md");
  EXPECT_EQ(a.substr(a.find(table)), b.substr(b.find(table)));
  // The plots, drawn by the report renderer in the services' Python (the checkout's .venv here);
  // a Python that fails costs the plots and a warning naming the command, never the report.
  for (const char* png : {"loss_vs_step.png", "ppl_vs_length.png", "loss_by_position.png"})
    EXPECT_TRUE(roformer::path_exists(out + "/" + png)) << png << "\n" << r.output;
  r = run_command("ROFORMER_PYTHON=/bin/false '" + roformer_binary() + "' sweep '" + dir.file("sweep.yaml") +
                  "' --out '" + out + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("the plots were not drawn: it exited 1"), std::string::npos) << r.output;
  // A typo in a variant fails before any training.
  write_file(dir.file("bad.yaml"),
             "config: tiny.yaml\nvariants:\n  - {name: x, set: [\"model.position.kind=rotary\"]}\n");
  r = run_command("'" + roformer_binary() + "' sweep '" + dir.file("bad.yaml") + "' --out '" + dir.file("bad") + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("rotary"), std::string::npos) << r.output;
  EXPECT_FALSE(roformer::path_exists(dir.file("bad")));
}

// eval.scaling_on: the scaling variants run on the rope variants it names and on no other rope
// variant; the evaluation they give differs from the unscaled one past the training length.
TEST(Sweep, ScalingRunsOnlyOnTheVariantsScalingOnNames) {
  TempDir dir;
  const std::string ds = make_word_dataset(dir);
  write_tiny_config(dir, ds, "causal_lm");
  write_file(dir.file("sweep.yaml"),
             "name: on\nconfig: tiny.yaml\nset: [\"train.steps=10\", \"train.checkpoint_every=10\"]\nseeds: [1]\n"
             "variants:\n  - {name: rope, set: [\"model.position.kind=rope\"]}\n"
             "  - {name: p-rope, set: [\"model.position.rope.frequency_fraction=0.5\"]}\n"
             "eval:\n  lengths: [32, 64]\n  max_tokens: 500\n  scaling_on: [rope]\n"
             "  scaling:\n    - {name: pi-2, set: [\"model.position.rope.scaling.kind=linear\", "
             "\"model.position.rope.scaling.factor=2\"]}\n");
  const std::string out = dir.file("out");
  const auto r = run_command("'" + roformer_binary() + "' sweep '" + dir.file("sweep.yaml") + "' --out '" + out + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(roformer::path_exists(out + "/runs/rope-seed1/eval/chunks-pi-2.json"));
  EXPECT_TRUE(roformer::path_exists(out + "/runs/p-rope-seed1/eval/chunks.json"));
  EXPECT_FALSE(roformer::path_exists(out + "/runs/p-rope-seed1/eval/chunks-pi-2.json"));
  const json plain = json::parse(read_file(out + "/runs/rope-seed1/eval/chunks.json"));
  const json pi = json::parse(read_file(out + "/runs/rope-seed1/eval/chunks-pi-2.json"));
  EXPECT_NE(plain["results"][1]["ppl"].get<double>(), pi["results"][1]["ppl"].get<double>());
  const std::string report = read_file(out + "/report.md");
  EXPECT_NE(report.find("| rope | pi-2 |"), std::string::npos) << report;
  EXPECT_EQ(report.find("| p-rope | pi-2 |"), std::string::npos) << report;
}

// `from`: a variant's run of each seed starts from the named variant's run of the same seed
// (DroPE's protocol as a sweep row); without that run's checkpoint it stops with exit 2.
TEST(Sweep, AVariantFromAnotherStartsFromItsRunOfTheSameSeed) {
  TempDir dir;
  const std::string ds = make_word_dataset(dir);
  write_tiny_config(dir, ds, "causal_lm");
  write_file(dir.file("sweep.yaml"),
             "name: from\nconfig: tiny.yaml\nset: [\"train.steps=10\", \"train.checkpoint_every=10\"]\n"
             "seeds: [1, 2]\nvariants:\n  - {name: rope, set: [\"model.position.kind=rope\"]}\n"
             "  - {name: drope, from: rope, set: [\"model.position.kind=none\", \"train.init_protocol=drope\", "
             "\"train.steps=4\"]}\neval:\n  lengths: [32]\n  max_tokens: 200\n");
  const std::string out = dir.file("out"), sweep = "'" + roformer_binary() + "' sweep '" + dir.file("sweep.yaml");
  auto r = run_command(sweep + "' --out '" + out + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* seed : {"1", "2"}) {
    const std::string config = read_file(out + "/runs/drope-seed" + seed + "/config.yaml");
    EXPECT_NE(config.find("init_from: \"" + out + "/runs/rope-seed" + seed + "\"\n"), std::string::npos) << config;
  }
  std::filesystem::remove_all(out + "/runs/rope-seed1/checkpoints");
  std::filesystem::remove_all(out + "/runs/drope-seed1");
  r = run_command(sweep + "' --out '" + out + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("rope-seed1, which has no checkpoint"), std::string::npos) << r.output;
}

TEST(Sweep, ReportFromFixtureMetricsHasTheExpectedNumbers) {
  TempDir dir;
  const std::string ds = make_word_dataset(dir, 4000);
  write_tiny_config(dir, ds, "causal_lm");
  write_file(dir.file("sweep.yaml"),
             "name: fx\nconfig: tiny.yaml\nseeds: [1, 2]\nvariants:\n  - {name: rope, set: []}\n"
             "eval:\n  lengths: [32, 64]\n  protocols: [chunks]\n");
  for (int seed : {1, 2}) {
    const std::string run = dir.file("out/runs/rope-seed" + std::to_string(seed));
    roformer::make_directories(run + "/eval");
    write_file(run + "/metrics.jsonl",
               "{\"type\":\"train\",\"step\":10,\"loss\":2.0}\n{\"type\":\"eval\",\"step\":40,\"loss\":" +
                   std::string(seed == 1 ? "1.0" : "3.0") + "}\n");
    const double p32 = seed == 1 ? 10.0 : 20.0, p64 = seed == 1 ? 30.0 : 50.0;
    write_file(run + "/eval/chunks.json", json({{"results",
                                                 {{{"length", 32}, {"applicable", true}, {"ppl", p32}},
                                                  {{"length", 64}, {"applicable", true}, {"ppl", p64}}}}})
                                              .dump());
  }
  const auto r = run_command("'" + roformer_binary() + "' sweep '" + dir.file("sweep.yaml") + "' --out '" +
                             dir.file("out") + "' --report-only");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string report = read_file(dir.file("out/report.md"));
  EXPECT_NE(report.find("| rope | 2.0000 ± 1.4142 |"), std::string::npos) << report;  // valid loss 1 and 3
  EXPECT_NE(report.find("| rope | 15.00 ± 7.07 | 40.00 ± 14.14 |"), std::string::npos) << report;
  EXPECT_NE(report.find("| rope | 1.00 | 2.67 |"), std::string::npos) << report;  // 40 / 15
  // What kill -9 leaves, a last line cut short, is skipped with a warning: the same report.
  const std::string report_only = "'" + roformer_binary() + "' sweep '" + dir.file("sweep.yaml") + "' --out '" +
                                  dir.file("out") + "' --report-only";
  const std::string metrics1 = dir.file("out/runs/rope-seed1/metrics.jsonl");
  write_file(metrics1, read_file(metrics1) + "{\"type\":\"train\",\"st");
  auto again = run_command(report_only);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("metrics.jsonl:3: last line is incomplete"), std::string::npos) << again.output;
  EXPECT_EQ(read_file(dir.file("out/report.md")), report);
  // A stray file in eval/ that is not an evaluation result is named, with exit 2 (it was exit 1).
  write_file(dir.file("out/runs/rope-seed2/eval/stray.json"), "not json");
  again = run_command(report_only);
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("eval/stray.json' is not an evaluation result"), std::string::npos) << again.output;
}

// The relative families of issue 20 through the CLI: a tiny causal model trains (the loss
// falls), `eval` at the training length reproduces the trainer's validation loss, and each
// runs past the training length (Shaw and DeBERTa by clipping, XL and xPos by their formulas).
TEST(Eval, RelativeFamiliesTrainAndEvaluatePastTheTrainingLength) {
  for (const std::string kind : {"shaw", "transformer_xl", "deberta", "xpos"}) {
    SCOPED_TRACE(kind);
    Trained t("causal_lm", "--set model.position.kind=" + kind + " --set model.position.shaw.max_distance=4" +
                               " --set model.position.deberta.position_buckets=8" +
                               " --set model.position.deberta.max_relative_positions=32");
    const json j = expect_trains_and_evaluates_at_4x(t);
    // xPos rotates q and k and leaves the scores to the fused kernel; the others evaluate in tiles.
    EXPECT_EQ(j["results"][1]["attention"], kind == "xpos" ? "short-attention" : "tile-attention");
    if (kind != "xpos") expect_tiles_equal_the_reference(t, j);
  }
}

// The 2022-2024 families of issue 36 the same way: trained from the CLI at 32 tokens, evaluated at
// 1x (the trainer's validation loss again) and 4x; KERPLE and Sandwich ride the short-sequence
// kernel with their relative bias inside it (SDPA with the bias in the mask past 512 tokens), FIRE evaluates through
// tile attention (its term computed per tile) and CoPE through the short-sequence kernel with its term (tile attention
// past 512 tokens).
TEST(Eval, FrontierFamiliesTrainAndEvaluatePastTheTrainingLength) {
  for (const std::string kind : {"fire", "kerple", "sandwich", "cope"}) {
    SCOPED_TRACE(kind);
    Trained t("causal_lm", "--set model.position.kind=" + kind);
    const json j = expect_trains_and_evaluates_at_4x(t);
    EXPECT_EQ(j["results"][1]["attention"], kind == "fire" ? "tile-attention" : "short-attention");
    if (kind == "cope" || kind == "fire") expect_tiles_equal_the_reference(t, j);
  }
}

// The methods of 2025 the same way: FoX (its decay from the forget gates) and stick-breaking
// attention over RoPE evaluate through tile attention; SSMax with QK-norm keeps the fused kernels
// (our CPU op here).
TEST(Eval, Methods2025TrainAndEvaluatePastTheTrainingLength) {
  const std::vector<std::pair<std::string, std::string>> methods{
      {"--set model.position.kind=fox", "tile-attention"},
      {"--set model.position.kind=rope --set model.attention_normalizer=stick_breaking", "tile-attention"},
      {"--set model.position.kind=none --set model.attention_scale=ssmax --set model.qk_norm=true", "short-attention"}};
  for (const auto& [method, kernel] : methods) {
    SCOPED_TRACE(method);
    Trained t("causal_lm", method);
    const json j = expect_trains_and_evaluates_at_4x(t);
    EXPECT_EQ(j["results"][1]["attention"], kernel);
  }
}

// Issue 37's evaluation-time methods on a plain RoPE checkpoint (no retraining; the keys are not
// architecture): ReRoPE and Leaky ReRoPE with a window covering the training length and log-n
// past it leave the 1x loss as trained, while Llama 3's static rule changes it; at 4x every
// method gives a finite loss different from plain RoPE's.
TEST(Eval, RopeExtensionMethodsApplyToAPlainRopeCheckpoint) {
  Trained t("causal_lm", "--set model.position.kind=rope");
  const std::string lengths = "--lengths 32,128 --set eval.max_tokens=512 --set eval.batch_size=8";
  const json plain = t.eval(lengths);
  const std::vector<std::pair<std::string, bool>> methods{
      {"--set model.position.rope.mode=rerope --set model.position.rope.rerope.window=32", true},
      {"--set model.position.rope.mode=rerope --set model.position.rope.rerope.window=32 --set "
       "model.position.rope.rerope.leak=16",
       true},
      {"--set model.attention_scale=logn_past_training", true},
      {"--set model.position.rope.mode=self_extend --set model.position.rope.self_extend.window=32 --set "
       "model.position.rope.self_extend.group=4",
       true},
      {"--set model.position.rope.mode=dual_chunk --set model.position.rope.dual_chunk.chunk_size=40 --set "
       "model.position.rope.dual_chunk.local_window=8",
       true},  // chunks of 32 tokens: the training length is one chunk
      {"--set model.position.rope.mode=string --set model.position.rope.string.local=4", false},
      {"--set model.position.rope.scaling.kind=llama3 --set model.position.rope.scaling.factor=4", false}};
  for (const auto& [method, same_at_1x] : methods) {
    SCOPED_TRACE(method);
    const json j = t.eval(lengths + " " + method);
    const double at1x = j["results"][0]["loss"].get<double>(), plain1x = plain["results"][0]["loss"].get<double>();
    if (same_at_1x) {
      EXPECT_NEAR(at1x, plain1x, 1e-5);
    } else {
      EXPECT_GT(std::abs(at1x - plain1x), 1e-6);
    }
    const double at4x = j["results"][1]["loss"].get<double>();
    EXPECT_TRUE(std::isfinite(at4x) && at4x > 0) << j.dump();
    EXPECT_GT(std::abs(at4x - plain["results"][1]["loss"].get<double>()), 1e-6);
  }
}

// DroPE's temperature fitted on the valid split: c = 0 is the first trial, the chosen c is the
// lowest loss tried, the results are an evaluation with that c, and the training length
// (beta = 1) is untouched.
TEST(Eval, DropeTemperatureFitPicksTheLowestValidLoss) {
  Trained t("causal_lm", "--set model.position.kind=none");
  const std::string common = "--lengths 32,64 --set eval.max_tokens=512 --set eval.batch_size=8";
  const json fitted = t.eval(common + " --fit-temperature --set eval.fit_tokens=256");
  const json& fit = fitted["temperature_fit"];
  ASSERT_TRUE(fit.is_object()) << fitted.dump();
  EXPECT_EQ(fit["lengths"], json::array({64}));  // past the training length 32 only
  const auto& trials = fit["trials"];
  ASSERT_GE(trials.size(), 14u);
  EXPECT_EQ(trials[0][0].get<double>(), 0.0);
  double best = 1e300, best_c = -1;
  for (const auto& trial : trials) {
    if (trial[1].get<double>() >= best) continue;
    best = trial[1].get<double>();
    best_c = trial[0].get<double>();
  }
  EXPECT_EQ(fit["c"].get<double>(), best_c);
  EXPECT_LE(best, trials[0][1].get<double>());
  EXPECT_NE(fitted["methods"].get<std::string>().find("drope temperature"), std::string::npos);
  std::ostringstream c;
  c << std::setprecision(17) << best_c;
  const json again =
      t.eval(common + " --set model.attention_scale=drope --set model.attention_scale_factor=" + c.str());
  const json plain = t.eval(common);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_NEAR(fitted["results"][i]["loss"].get<double>(), again["results"][i]["loss"].get<double>(), 1e-9);
  EXPECT_NEAR(fitted["results"][0]["loss"].get<double>(), plain["results"][0]["loss"].get<double>(), 1e-9);
  if (best_c > 0.01) {
    EXPECT_GT(std::abs(fitted["results"][1]["loss"].get<double>() - plain["results"][1]["loss"].get<double>()), 1e-7);
  }
  // Nothing past the training length to fit at: a clear refusal.
  const auto r =
      run_command("'" + roformer_binary() + "' eval '" + t.checkpoint + "' --lengths 16,32 --fit-temperature");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("past the training length 32"), std::string::npos) << r.output;
}

}  // namespace eval_test
