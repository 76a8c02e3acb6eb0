// Synthetic tasks end to end as processes: a tiny model learns RULER's single-needle retrieval
// far above chance from configs/tasks/niah_single.yaml (real learning, not a smoke run); a task
// run with a length curriculum resumes bitwise; `roformer eval` scores a task checkpoint per
// length (exact match and token accuracy), and refuses lengths that cannot hold an example.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace task_integration_test {

using namespace roformer::testing;
using nlohmann::json;

std::string train(const std::string& config, const std::string& run, const std::string& extra, int* exit_code) {
  const CommandResult r = run_command("'" + roformer_binary() + "' train '" + config + "' --run-dir '" + run +
                                      "' --set train.device=cpu " + extra);
  *exit_code = r.exit_code;
  return r.output;
}

// Chance is 1/16 per value token and 1/256 for both: the model must beat it many times over.
TEST(TaskTrain, ATinyModelLearnsSingleNeedleRetrieval) {
  TempDir dir;
  const std::string run = dir.file("run");
  int code = -1;
  const std::string out =
      train(source_dir() + "/configs/tasks/niah_single.yaml", run,
            "--set train.steps=600 --set train.eval_every=600 --set train.checkpoint_every=600", &code);
  ASSERT_EQ(code, 0) << out;
  const std::vector<json> evals = metric_records(run, "eval");
  ASSERT_EQ(evals.size(), 2u);
  EXPECT_LT(evals.front()["exact_match"].get<double>(), 0.02);
  EXPECT_GT(evals.back()["exact_match"].get<double>(), 0.10) << out;
  EXPECT_GT(evals.back()["accuracy"].get<double>(), 0.30) << out;
  EXPECT_NE(out.find("task niah_single: lengths 32..64"), std::string::npos) << out;
  // `roformer eval` scores the task's floor on the same examples, and prints it under the table.
  const CommandResult r =
      run_command("'" + roformer_binary() + "' eval '" + run + "' --lengths 64 --out '" + dir.file("eval") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("floors (exact match of a trivial strategy"), std::string::npos) << r.output;
  const json at64 = json::parse(read_file(dir.file("eval") + "/eval.json"))["results"][0];
  const double floor = at64["floors"]["constant value"].get<double>();
  EXPECT_LT(floor, 0.02) << at64;  // one value token repeated: 1/256 of the answers at most by chance
  EXPECT_GT(at64["exact_match"].get<double>(), floor + 0.05) << at64;
}

TEST(TaskTrain, ACurriculumRunResumesBitwiseAndEvalScoresEachLength) {
  TempDir dir;
  const std::string config = source_dir() + "/configs/tasks/copy.yaml";
  const std::string tiny =
      "--set train.steps=40 --set train.batch_size=8 --set train.log_every=10 --set train.eval_every=20 "
      "--set train.checkpoint_every=20 --set data.task.min_length=12 --set data.seq_len=24 "
      "--set data.task.eval_examples=20 --set model.hidden_size=32 --set model.ffn_size=64 "
      "--set train.threads=1 ";  // one thread in both runs: an adaptive count could differ between them under load
  const std::string straight = dir.file("straight"), resumed = dir.file("resumed");
  int code = -1;
  std::string out = train(config, straight, tiny, &code);
  ASSERT_EQ(code, 0) << out;
  out = train(config, resumed, tiny, &code);  // then back to its step-20 checkpoint and on from there
  ASSERT_EQ(code, 0) << out;
  ASSERT_EQ(run_command("rm -rf '" + resumed + "/checkpoints/step_40'").exit_code, 0);
  out = train(config, resumed, tiny + "--resume auto", &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(safetensors_difference(checkpoint_weights(straight, 40), checkpoint_weights(resumed, 40)), "");
  EXPECT_EQ(metrics_trajectory(straight), metrics_trajectory(resumed));

  const std::string ckpt = straight + "/checkpoints/step_40", out_dir = dir.file("eval");
  CommandResult r =
      run_command("'" + roformer_binary() + "' eval '" + ckpt + "' --lengths 24,48 --out '" + out_dir + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("task copy, trained at length 24"), std::string::npos) << r.output;
  const json report = json::parse(read_file(out_dir + "/eval.json"));
  EXPECT_EQ(report["task"], "copy");
  ASSERT_EQ(report["results"].size(), 2u);
  for (const json& length : report["results"]) {
    EXPECT_EQ(length["examples"].get<int64_t>(), 20);
    const double exact = length["exact_match"].get<double>(), tokens = length["accuracy"].get<double>();
    EXPECT_TRUE(exact >= 0 && exact <= tokens) << length;  // a whole answer right means its tokens are
  }
  // Length 24 holds 11 copied symbols, 48 holds 23: the answers are 11 and 23 tokens per example.
  EXPECT_EQ(report["results"][0]["tokens"].get<int64_t>(), 20 * 11);
  EXPECT_EQ(report["results"][1]["tokens"].get<int64_t>(), 20 * 23);
  r = run_command("'" + roformer_binary() + "' eval '" + ckpt + "' --lengths 2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("evaluation length 2 cannot hold one copy example"), std::string::npos) << r.output;
}

}  // namespace task_integration_test
