// The fine-tuned model and its evaluation against references computed here: batching pads
// without changing any example's output, the head reads [CLS] (or a causal encoder's last real
// token), triplet scores equal separate pair forwards (cross-encoder) or scale * cosine of the
// mean states written out by hand (bi-encoder), metrics and predictions from known outputs, and
// task files read, tokenised and truncated as the task says.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "roformer/common/errors.h"
#include "roformer/data/tokenizer.h"
#include "roformer/finetune/metrics.h"
#include "roformer/finetune/task_eval.h"
#include "roformer/finetune/task_model.h"
#include "test_support.h"

namespace finetune_task_test {

using namespace roformer;
using namespace roformer::finetune;
using roformer::testing::TempDir;
using roformer::testing::user_error;
using roformer::testing::write_file;

namespace {

config::ModelConfig tiny_model(config::Objective objective = config::Objective::mlm) {
  config::ModelConfig m;
  m.vocab_size = 264;
  m.hidden_size = 16;
  m.num_layers = 2;
  m.num_heads = 2;
  m.ffn_size = 32;
  m.hidden_dropout = m.attention_dropout = 0.0;
  m.objective = objective;
  m.type_vocab_size = 2;
  return m;
}

TaskSpec spec_of(HeadKind head, int64_t labels, bool bi = false) {
  TaskSpec s;
  s.head = head;
  s.num_labels = labels;
  s.bi_encoder = bi;
  s.scale = 7.0;
  s.labels = {"0", "1", "2"};
  s.labels.resize(static_cast<size_t>(std::max<int64_t>(labels, 1)));
  s.metrics = head == HeadKind::regression ? std::vector<std::string>{"pearson", "spearman"}
                                           : std::vector<std::string>{"accuracy", "f1", "mcc"};
  return s;
}

TaskModel double_model(const TaskSpec& spec, config::Objective objective = config::Objective::mlm) {
  TaskModel m(tiny_model(objective), spec, 0.0, 11);
  m->to(torch::kFloat64);
  m->eval();
  return m;
}

EncodedInput input(std::vector<int64_t> ids, int64_t types_from = 1000) {
  EncodedInput e;
  e.ids = std::move(ids);
  for (size_t i = 0; i < e.ids.size(); ++i) e.token_types.push_back(static_cast<int64_t>(i) >= types_from ? 1 : 0);
  return e;
}

const data::ByteTokenizer kBytes;
const int64_t kPad = kBytes.special_ids().at("[PAD]");

}  // namespace

TEST(FinetuneTask, CollatePadsRowsWithPadIdsAndAMask) {
  const EncodedInput a = input({258, 5, 6, 259}, 3), b = input({258, 7, 259});
  const TaskInputs in = collate({&a, &b}, kPad, torch::kCPU);
  const std::vector<int64_t> ids{258, 5, 6, 259, 258, 7, 259, kPad};
  EXPECT_TRUE(torch::equal(in.ids, torch::tensor(ids, torch::kLong).view({2, 4})));
  EXPECT_TRUE(torch::equal(in.mask, torch::tensor({1, 1, 1, 1, 1, 1, 1, 0}, torch::kLong).view({2, 4})));
  EXPECT_TRUE(torch::equal(in.types, torch::tensor({0, 0, 0, 1, 0, 0, 0, 0}, torch::kLong).view({2, 4})));
}

TEST(FinetuneTask, ParameterNamesAreHuggingFaceSequenceClassification) {
  std::set<std::string> names;
  for (const auto& p : TaskModel(tiny_model(), spec_of(HeadKind::classification, 3), 0.1, 1)->named_parameters())
    names.insert(p.key());
  for (const char* n : {"roformer.embeddings.word_embeddings.weight", "roformer.encoder.layer.1.output.dense.weight",
                        "classifier.dense.weight", "classifier.out_proj.weight", "classifier.out_proj.bias"})
    EXPECT_TRUE(names.count(n)) << n;
}

TEST(FinetuneTask, BatchingWithALongerInputChangesNoOutput) {
  for (auto objective : {config::Objective::mlm, config::Objective::causal_lm}) {
    TaskModel m = double_model(spec_of(HeadKind::classification, 3), objective);
    const EncodedInput shorter = input({258, 40, 41, 259}), longer = input({258, 50, 51, 52, 53, 54, 259, 60, 259}, 7);
    const torch::Tensor alone = m->forward(collate({&shorter}, kPad, torch::kCPU));
    const torch::Tensor batched = m->forward(collate({&shorter, &longer}, kPad, torch::kCPU));
    EXPECT_LT((batched[0] - alone[0]).abs().max().item<double>(), 1e-10);
    EXPECT_GT((batched[1] - alone[0]).abs().max().item<double>(), 1e-6);  // a different input differs
  }
}

TEST(FinetuneTask, TheHeadReadsClsOrACausalEncodersLastRealToken) {
  for (auto objective : {config::Objective::mlm, config::Objective::causal_lm}) {
    TaskModel m = double_model(spec_of(HeadKind::classification, 2), objective);
    const EncodedInput a = input({258, 70, 71, 72, 259}), b = input({258, 80, 259});
    const TaskInputs in = collate({&a, &b}, kPad, torch::kCPU);
    const torch::Tensor hidden = m->roformer->forward({in.ids, in.mask, in.types});
    const bool causal = objective == config::Objective::causal_lm;
    for (int64_t row = 0; row < 2; ++row) {
      const int64_t token = causal ? (row == 0 ? 4 : 2) : 0;
      const torch::Tensor expected = m->classifier->forward(hidden[row].narrow(0, token, 1).unsqueeze(0));
      EXPECT_LT((m->forward(in)[row] - expected[0]).abs().max().item<double>(), 1e-12) << causal;
    }
  }
}

TEST(FinetuneTask, CrossEncoderTripletScoresAreTheTwoPairForwards) {
  TaskModel m = double_model(spec_of(HeadKind::triplet, 1));
  TaskExample e1, e2;
  e1.inputs = {input({258, 1, 259, 2, 259}, 3), input({258, 1, 259, 3, 4, 259}, 3)};
  e2.inputs = {input({258, 9, 9, 259, 8, 259}, 4), input({258, 9, 259, 7, 259}, 3)};
  const torch::Tensor got = m->example_outputs(collate_examples({&e1, &e2}, kPad, torch::kCPU), 2);
  ASSERT_EQ(got.sizes(), (std::vector<int64_t>{2, 2}));
  const TaskExample* ex[] = {&e1, &e2};
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t k = 0; k < 2; ++k) {
      const torch::Tensor alone = m->forward(collate({&ex[i]->inputs[static_cast<size_t>(k)]}, kPad, torch::kCPU));
      EXPECT_NEAR(got[i][k].item<double>(), alone[0][0].item<double>(), 1e-10);
    }
}

TEST(FinetuneTask, BiEncoderScoresAreScaledCosinesOfMeanStates) {
  TaskModel m = double_model(spec_of(HeadKind::triplet, 1, /*bi=*/true));
  TaskExample e;
  e.inputs = {input({258, 10, 11, 12, 259}), input({258, 10, 259}), input({258, 30, 31, 32, 33, 34, 259})};
  const torch::Tensor got = m->example_outputs(collate_examples({&e}, kPad, torch::kCPU), 1);
  std::vector<std::vector<double>> mean;
  for (const EncodedInput& in : e.inputs) {  // each input alone, no padding: the plain mean over its tokens
    const torch::Tensor ids = torch::tensor(in.ids, torch::kLong).unsqueeze(0);
    const torch::Tensor h = m->roformer->forward({ids, torch::ones_like(ids), torch::zeros_like(ids)})[0];
    std::vector<double> v(16, 0.0);
    for (int64_t t = 0; t < h.size(0); ++t)
      for (int64_t j = 0; j < 16; ++j)
        v[static_cast<size_t>(j)] += h[t][j].item<double>() / static_cast<double>(h.size(0));
    mean.push_back(v);
  }
  auto cosine = [](const std::vector<double>& a, const std::vector<double>& b) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t j = 0; j < a.size(); ++j) {
      ab += a[j] * b[j];
      aa += a[j] * a[j];
      bb += b[j] * b[j];
    }
    return ab / std::sqrt(aa * bb);
  };
  EXPECT_NEAR(got[0][0].item<double>(), 7.0 * cosine(mean[0], mean[1]), 1e-10);
  EXPECT_NEAR(got[0][1].item<double>(), 7.0 * cosine(mean[0], mean[2]), 1e-10);
}

TEST(FinetuneTask, MetricsAndPredictionsFollowTheOutputs) {
  TaskSplit split;
  for (int64_t label : {0, 1, 1, 0, 1}) {
    TaskExample e;
    e.label = label;
    split.examples.push_back(e);
  }
  const torch::Tensor logits =
      torch::tensor({2.0, 1.0, 0.0, 3.0, 5.0, 1.0, 0.0, -1.0, 0.5, 0.4}, torch::kFloat64).view({5, 2});
  const TaskSpec cls = spec_of(HeadKind::classification, 2);
  const std::vector<int64_t> pred{0, 1, 0, 0, 0}, gold{0, 1, 1, 0, 1};
  const auto m = task_metrics(cls, logits, split);
  EXPECT_DOUBLE_EQ(m.at("accuracy"), 0.6);
  EXPECT_DOUBLE_EQ(m.at("f1"), f1_binary(pred, gold));
  EXPECT_DOUBLE_EQ(m.at("mcc"), matthews_correlation(pred, gold));
  // Triplets: label 0 means B is closer, correct when s(A,B) > s(A,C).
  TaskSpec tri = spec_of(HeadKind::triplet, 1);
  tri.metrics = {"accuracy"};
  EXPECT_DOUBLE_EQ(task_metrics(tri, logits, split).at("accuracy"), 0.6);
  TaskScores scores;
  scores.outputs = logits;
  std::istringstream lines(predictions_jsonl(tri, scores, split));
  std::vector<std::string> predicted;
  for (std::string line; std::getline(lines, line);) predicted.push_back(nlohmann::json::parse(line)["prediction"]);
  EXPECT_EQ(predicted, (std::vector<std::string>{"B", "C", "B", "B", "B"}));
  // Regression: Pearson and Spearman of the scores.
  const TaskSpec reg = spec_of(HeadKind::regression, 1);
  const std::vector<double> target{1.0, 2.0, 3.0, 4.0, 5.0}, out{1.5, 1.0, 3.5, 4.0, 9.0};
  for (size_t i = 0; i < 5; ++i) split.examples[i].score = target[i];
  const auto r = task_metrics(reg, torch::tensor(out, torch::kFloat64), split);
  EXPECT_DOUBLE_EQ(r.at("pearson"), pearson(out, target));
  EXPECT_NEAR(r.at("spearman"), 0.9, 1e-12);  // ranks 2 1 3 4 5 against 1 2 3 4 5: 1 - 6*2/(5*24)
}

TEST(FinetuneTask, SplitsAreReadTokenisedAndTruncatedAsTheTaskSays) {
  TempDir dir;
  config::FinetuneConfig f;
  f.task = config::FinetuneTask::glue;
  f.glue_task = "mrpc";
  f.data_dir = dir.path();
  f.max_length = 10;
  write_file(dir.file("train.tsv"),
             "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tabc\tde\n0\t3\t4\tabcdefgh\txyz\n");
  const TaskSplit s = load_split(f, split_path(f, "train", true), kBytes);
  ASSERT_EQ(s.examples.size(), 2u);
  EXPECT_EQ(s.examples[0].inputs[0].ids, (std::vector<int64_t>{258, 'a', 'b', 'c', 259, 'd', 'e', 259}));
  EXPECT_EQ(s.examples[1].inputs[0].ids.size(), 10u);  // 7 text tokens: longest first -> abcd + xyz
  EXPECT_EQ(s.examples[1].label, 0);
  EXPECT_EQ(s.truncated, 1);
  EXPECT_NE(user_error([&] { split_path(f, "dev", true); }).find("dev.tsv"), std::string::npos);
  f.glue_task = "mnli";
  EXPECT_NE(user_error([&] { split_path(f, "dev", true); }).find("dev_matched.tsv"), std::string::npos);
  f = {};
  f.task = config::FinetuneTask::triplets;
  f.data_dir = dir.path();
  f.triplet_encoder = config::TripletEncoder::bi;
  write_file(dir.file("dev.jsonl"), "{\"A\": \"aa\", \"B\": \"bb\", \"C\": \"cc\", \"label\": \"C\"}\n");
  const TaskSplit t = load_split(f, split_path(f, "dev", true), kBytes);
  ASSERT_EQ(t.examples[0].inputs.size(), 3u);  // A, B, C apart
  EXPECT_EQ(t.examples[0].inputs[2].ids, (std::vector<int64_t>{258, 'c', 'c', 259}));
  EXPECT_EQ(t.examples[0].label, 1);
  EXPECT_EQ(split_path(f, "test", false), "");  // optional and absent
  write_file(dir.file("train.jsonl"), "\n");
  EXPECT_NE(user_error([&] { load_split(f, split_path(f, "train", true), kBytes); }).find("no triplets"),
            std::string::npos);
}

}  // namespace finetune_task_test
