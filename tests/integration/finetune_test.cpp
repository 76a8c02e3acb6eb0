// `roformer finetune` end to end through the CLI on a tiny pretrained model: a triplet task
// the bi-encoder must learn (dev accuracy and loss), exact resume against an uninterrupted run
// (dropout on), a GLUE SST-2 file through to the predictions file and the Hugging Face
// conversion, data parallel over two Gloo ranks against one process on the same global batch,
// a learned position table shorter than the inputs refused before anything is written, and a
// SentencePiece checkpoint tokenised through the roformer-prepare-data service.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "roformer/common/files.h"
#include "test_support.h"

namespace finetune_test {

using namespace roformer::testing;
using nlohmann::json;

namespace {

std::string bin() {
  return "'" + roformer_binary() + "'";
}

// A tiny MLM model pretrained for 40 steps (once for the whole file): its step_40 checkpoint.
const std::string& pretrained() {
  static TempDir dir;
  static const std::string ckpt = [] {
    const std::string cfg = write_tiny_config(dir, make_word_dataset(dir, 20000));
    const auto r = run_command(bin() + " train '" + cfg + "' --run-dir '" + dir.file("run") + "'");
    if (r.exit_code != 0) throw std::runtime_error("pretraining failed:\n" + r.output);
    return dir.file("run/checkpoints/step_40");
  }();
  return ckpt;
}

json results(const std::string& run) {
  return json::parse(read_file(run + "/results.json"));
}

}  // namespace

TEST(Finetune, BiEncoderLearnsTheTripletTask) {
  TempDir dir;
  const std::string task = write_triplet_task(dir, "bi");
  const auto r =
      run_command(bin() + " finetune '" + pretrained() + "' '" + task + "' --run-dir '" + dir.file("run") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json res = results(dir.file("run"));
  ASSERT_EQ(res["dev"].size(), 3u);
  EXPECT_LT(res["dev"][2]["loss"].get<double>(), res["dev"][0]["loss"].get<double>());
  EXPECT_LT(res["dev"][2]["train_loss"].get<double>(), res["dev"][0]["train_loss"].get<double>());
  EXPECT_GE(res["test"]["accuracy"].get<double>(), 0.9) << res.dump();
  const std::string predictions = read_file(dir.file("run/test_predictions.jsonl"));
  EXPECT_EQ(std::count(predictions.begin(), predictions.end(), '\n'), 32);
  EXPECT_NE(read_file(dir.file("run/results.md")).find("| 3 | 24 |"), std::string::npos);  // 8 steps per epoch
}

TEST(Finetune, ResumeEqualsAnUninterruptedRun) {
  TempDir dir;
  const std::string task = write_triplet_task(dir, "cross");
  const std::string full = dir.file("full"), resumed = dir.file("resumed");
  auto r = run_command(bin() + " finetune '" + pretrained() + "' '" + task + "' --run-dir '" + full + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The epoch-1 checkpoint (step 8) alone, then --resume auto (the metrics writer drops later records).
  ASSERT_EQ(run_command("mkdir -p '" + resumed + "/checkpoints' && cp -r '" + full + "/checkpoints/step_8' '" +
                        resumed + "/checkpoints/' && cp '" + full + "/metrics.jsonl' '" + resumed + "/'")
                .exit_code,
            0);
  r = run_command(bin() + " finetune '" + pretrained() + "' '" + task + "' --run-dir '" + resumed + "' --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos);
  EXPECT_EQ(safetensors_difference(full + "/checkpoints/step_24/model.safetensors",
                                   resumed + "/checkpoints/step_24/model.safetensors"),
            "");
  EXPECT_EQ(results(full)["test"], results(resumed)["test"]);
  EXPECT_EQ(read_file(full + "/dev_predictions.jsonl"), read_file(resumed + "/dev_predictions.jsonl"));
}

// Stopped in the middle of an epoch (the step-4 checkpoint of an 8-step epoch) and resumed: the
// epoch's mean training loss in results.json covers all its steps, as in the uninterrupted run
// (it averaged only the resumed steps). Resuming with another encoder type is refused.
TEST(Finetune, MidEpochResumeKeepsTheEpochTrainLossAndTheTask) {
  TempDir dir, other;
  const std::string task = write_triplet_task(dir, "cross");
  const std::string extra = " --set train.checkpoint_every=4 --set train.keep_checkpoints=100";
  const std::string full = dir.file("full"), resumed = dir.file("resumed");
  auto r = run_command(bin() + " finetune '" + pretrained() + "' '" + task + "' --run-dir '" + full + "'" + extra);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(run_command("mkdir -p '" + resumed + "/checkpoints' && cp -r '" + full + "/checkpoints/step_4' '" +
                        resumed + "/checkpoints/' && cp '" + full + "/metrics.jsonl' '" + resumed + "/'")
                .exit_code,
            0);
  const std::string bi_task = write_triplet_task(other, "bi");
  r = run_command(bin() + " finetune '" + pretrained() + "' '" + bi_task + "' --run-dir '" + resumed +
                  "' --resume auto" + extra);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("finetune.triplet_encoder = cross but this run has bi"), std::string::npos) << r.output;
  r = run_command(bin() + " finetune '" + pretrained() + "' '" + task + "' --run-dir '" + resumed + "' --resume auto" +
                  extra);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from " + resumed + "/checkpoints/step_4"), std::string::npos) << r.output;
  const json a = results(full), b = results(resumed);
  ASSERT_EQ(a["dev"].size(), 3u);
  ASSERT_EQ(b["dev"].size(), 3u);
  for (size_t e = 0; e < 3; ++e) EXPECT_EQ(a["dev"][e]["train_loss"], b["dev"][e]["train_loss"]) << "epoch " << e + 1;
}

TEST(Finetune, GlueSst2RunsToPredictionsAndConvertsToSequenceClassification) {
  TempDir dir;
  roformer::make_directories(dir.file("sst"));
  std::string tsv = "sentence\tlabel\n";
  for (int i = 0; i < 48; ++i)
    tsv += (i % 2 ? "a good and fine film " : "a bad and dull film ") + std::to_string(i) + "\t" +
           std::to_string(i % 2) + "\n";
  write_file(dir.file("sst/train.tsv"), tsv);
  write_file(dir.file("sst/dev.tsv"), tsv.substr(0, tsv.find("\n", tsv.size() / 2) + 1));
  write_file(dir.file("task.yaml"),
             "name: sst\nfinetune:\n  task: glue\n  glue_task: sst2\n  data_dir: " + dir.file("sst") +
                 "\n  max_length: 64\n  epochs: 2\n  tokenizer: byte\n"
                 "train:\n  batch_size: 8\n  lr: 1.0e-3\n  threads: 1\n");
  const std::string run = dir.file("run");
  auto r =
      run_command(bin() + " finetune '" + pretrained() + "' '" + dir.file("task.yaml") + "' --run-dir '" + run + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json res = results(run);
  EXPECT_EQ(res["task"], "glue/sst2");
  EXPECT_TRUE(res["dev"][1]["metrics"].contains("accuracy"));
  const std::string preds = read_file(run + "/dev_predictions.jsonl");
  const json first = json::parse(preds.substr(0, preds.find('\n')));
  EXPECT_EQ(first["output"].size(), 2u);
  EXPECT_EQ(first["gold"], "0");
  // The fine-tuned classifier converts to transformers' RoFormerForSequenceClassification.
  r = run_command(bin() + " convert native-to-hf '" + run + "/checkpoints/step_12' '" + dir.file("hf") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json hf = json::parse(read_file(dir.file("hf/config.json")));
  EXPECT_EQ(hf["architectures"][0], "RoFormerForSequenceClassification");
  EXPECT_EQ(hf["id2label"].size(), 2u);
}

TEST(Finetune, DataParallelEqualsOneProcessOnTheGlobalBatch) {
  TempDir dir;
  const std::string task = write_triplet_task(dir, "bi");
  const std::string one = dir.file("one"), two = dir.file("two");
  // No dropout: the two runs draw different dropout streams by design.
  const std::string args = "' --set finetune.epochs=1 --set model.hidden_dropout=0 --set finetune.classifier_dropout=0";
  auto r = run_command(bin() + " finetune '" + pretrained() + "' '" + task + "' --run-dir '" + one + args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command("'" + source_dir() + "/scripts/launch.sh' --nproc 2 --timeout 120 -- " + bin() + " finetune '" +
                  pretrained() + "' '" + task + "' --run-dir '" + two + args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const double a = results(one)["dev"][0]["loss"], b = results(two)["dev"][0]["loss"];
  EXPECT_NEAR(a, b, 1e-5);
  // Accuracy over 32 test triplets: equal up to one borderline triplet flipped by rounding.
  EXPECT_NEAR(results(one)["test"]["accuracy"].get<double>(), results(two)["test"]["accuracy"].get<double>(),
              1.0 / 32 + 1e-9);
}

TEST(Finetune, LearnedTableShorterThanTheInputsIsRefusedBeforeWriting) {
  TempDir dir;
  const std::string cfg = write_tiny_config(dir, make_word_dataset(dir, 20000));
  auto r =
      run_command(bin() + " train '" + cfg + "' --run-dir '" + dir.file("run") +
                  "' --set model.position.kind=learned --set model.position.max_positions=48 --set train.steps=10");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string task = write_triplet_task(dir, "bi");
  r = run_command(bin() + " finetune '" + dir.file("run/checkpoints/step_10") + "' '" + task + "' --run-dir '" +
                  dir.file("ft") + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("model.position.max_positions=48"), std::string::npos) << r.output;
  EXPECT_FALSE(roformer::path_exists(dir.file("ft")));
}

TEST(Finetune, SentencePieceCheckpointsTokeniseThroughTheToolAndRefuseTheByteTokenizer) {
  TempDir dir;
  std::string text;  // lines of the triplets' words (SentencePiece trains on sentences)
  for (int i = 0; i < 3000; ++i)
    text += std::string(i % 3 ? "the kernel driver maps a page " : "a socket packet takes the route ") +
            (i % 5 ? "into memory.\n" : "to the inode cache.\n");
  write_file(dir.file("train.txt"), text);
  write_file(dir.file("valid.txt"), text.substr(0, 4000));
  auto r = run_command(bin() + " prepare-data --input '" + dir.file("train.txt") + "' '" + dir.file("valid.txt") +
                       "' --tokenizer sentencepiece --vocab-size 300 --out '" + dir.file("ds-sp") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string cfg = write_tiny_config(dir, dir.file("ds-sp"));
  r = run_command(bin() + " train '" + cfg + "' --run-dir '" + dir.file("run") +
                  "' --set model.vocab_size=304 --set train.steps=10");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string ckpt = dir.file("run/checkpoints/step_10"), task = write_triplet_task(dir, "bi");
  r = run_command(bin() + " finetune '" + ckpt + "' '" + task + "' --run-dir '" + dir.file("ft") +
                  "' --set finetune.tokenizer=auto --set finetune.epochs=1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(sentencepiece tokenizer)"), std::string::npos) << r.output;
  // The task file says byte: the checkpoint's dataset says otherwise.
  r = run_command(bin() + " finetune '" + ckpt + "' '" + task + "' --run-dir '" + dir.file("ft-byte") + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("tokenised with sentencepiece"), std::string::npos) << r.output;
  EXPECT_FALSE(roformer::path_exists(dir.file("ft-byte")));
}

}  // namespace finetune_test
