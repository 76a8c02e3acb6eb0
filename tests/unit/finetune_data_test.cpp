// Fine-tuning inputs and metrics (issue 19's foundation): GLUE metrics against values computed
// by hand (the closed forms are in the comments) and scikit-learn's documented MCC example;
// GLUE TSV files in each task's own layout, including CoLA's headerless rows, STS-B scores and
// MNLI's gold_label among many columns; every malformed input refused with file, line and fix;
// the CAIL-style triplet JSONL format.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "roformer/common/errors.h"
#include "roformer/finetune/glue_tsv.h"
#include "roformer/finetune/metrics.h"
#include "roformer/finetune/triplets.h"
#include "test_support.h"

namespace finetune_data_test {

using namespace roformer;
using namespace roformer::finetune;
using roformer::testing::TempDir;
using roformer::testing::user_error;
using roformer::testing::write_file;

TEST(GlueMetrics, AccuracyAndF1) {
  // gold 1 1 0 0 1, predicted 1 0 1 0 1: TP 2, FP 1, FN 1 -> F1 = 4/6; 3 of 5 equal.
  const std::vector<int64_t> gold{1, 1, 0, 0, 1}, pred{1, 0, 1, 0, 1};
  EXPECT_DOUBLE_EQ(accuracy(pred, gold), 0.6);
  EXPECT_DOUBLE_EQ(f1_binary(pred, gold), 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(f1_binary(pred, gold, 0), 2.0 / 4.0);  // class 0: TP 1, FP 1, FN 1
  EXPECT_DOUBLE_EQ(f1_binary({0, 0}, {0, 0}), 0.0);       // no positive anywhere
  EXPECT_THROW(accuracy({}, {}), std::invalid_argument);
  EXPECT_THROW(accuracy({1}, {1, 0}), std::invalid_argument);
}

TEST(GlueMetrics, MatthewsCorrelation) {
  // scikit-learn's documented example: y_true [+1, +1, +1, -1], y_pred [+1, -1, +1, +1] -> -1/3.
  EXPECT_NEAR(matthews_correlation({1, -1, 1, 1}, {1, 1, 1, -1}), -1.0 / 3.0, 1e-15);
  EXPECT_DOUBLE_EQ(matthews_correlation({0, 1, 2, 2}, {0, 1, 2, 2}), 1.0);  // perfect, three classes
  EXPECT_DOUBLE_EQ(matthews_correlation({1, 1, 1}, {0, 1, 0}), 0.0);        // one predicted class
  // Three classes, C = [[2,1,0],[0,1,1],[1,0,2]] (rows gold): c = 5, s = 8, t = (3,2,3), p = (3,2,3):
  // (5*8 - (9+4+9)) / sqrt((64-22)(64-22)) = 18/42.
  const std::vector<int64_t> gold{0, 0, 0, 1, 1, 2, 2, 2}, pred{0, 0, 1, 1, 2, 0, 2, 2};
  EXPECT_NEAR(matthews_correlation(pred, gold), 18.0 / 42.0, 1e-15);
}

TEST(GlueMetrics, PearsonAndSpearmanWithTies) {
  // x = 1..5, y = 2 4 5 4 5: Sxy = 6, Sxx = 10, Syy = 6 -> r = sqrt(0.6).
  const std::vector<double> x{1, 2, 3, 4, 5}, y{2, 4, 5, 4, 5};
  EXPECT_NEAR(pearson(x, y), std::sqrt(0.6), 1e-15);
  // Ranks of y with ties averaged: 1, 2.5, 4.5, 2.5, 4.5 -> Sxy = 7, Syy = 9 -> 7/sqrt(90).
  EXPECT_EQ(average_ranks(y), (std::vector<double>{1, 2.5, 4.5, 2.5, 4.5}));
  EXPECT_NEAR(spearman(x, y), 7.0 / std::sqrt(90.0), 1e-15);
  EXPECT_DOUBLE_EQ(spearman(x, {1, 4, 9, 16, 25}), 1.0);  // monotone, not linear
  EXPECT_DOUBLE_EQ(pearson(x, {3, 3, 3, 3, 3}), 0.0);     // constant side
}

TEST(GlueTsv, ReadsEachTasksOwnLayout) {
  TempDir dir;
  write_file(dir.file("sst2.tsv"), "sentence\tlabel\nit 's a charming journey . \t1\na mess\t0\n");
  const GlueSplit sst2 = read_glue_tsv(dir.file("sst2.tsv"), glue_task("sst2"));
  ASSERT_EQ(sst2.examples.size(), 2u);
  EXPECT_EQ(sst2.examples[0].text_a, "it 's a charming journey . ");
  EXPECT_EQ(sst2.examples[0].label, 1);
  EXPECT_EQ(sst2.examples[1].line, 3);

  write_file(dir.file("mrpc.tsv"),
             "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\r\n1\t702876\t702977\tHe said \"yes\".\tHe agreed.\r\n");
  const GlueSplit mrpc = read_glue_tsv(dir.file("mrpc.tsv"), glue_task("mrpc"));
  EXPECT_EQ(mrpc.examples[0].text_a, "He said \"yes\".");  // quotes are literal, CRLF stripped
  EXPECT_EQ(mrpc.examples[0].text_b, "He agreed.");

  write_file(dir.file("stsb.tsv"),
             "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
             "0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA plane is taking off.\tAn air plane is "
             "taking off.\t5.000\n");
  const GlueSplit stsb = read_glue_tsv(dir.file("stsb.tsv"), glue_task("stsb"));
  EXPECT_TRUE(glue_task("stsb").regression());
  EXPECT_DOUBLE_EQ(stsb.examples[0].score, 5.0);

  // MNLI dev has label1..label5 and gold_label: the label comes from gold_label by name.
  write_file(dir.file("mnli.tsv"),
             "index\tpromptID\tpairID\tgenre\ts1bp\ts2bp\ts1p\ts2p\tsentence1\tsentence2\tlabel1\tlabel2\tgold_label\n"
             "0\t1\t2\tgov\t-\t-\t-\t-\tThe cat sat.\tA cat sat.\tneutral\tentailment\tentailment\n");
  const GlueSplit mnli = read_glue_tsv(dir.file("mnli.tsv"), glue_task("mnli"));
  EXPECT_EQ(mnli.examples[0].label, 1);  // contradiction, entailment, neutral

  // CoLA's train/dev rows have no header: source, label, annotation, sentence; its test file has one.
  write_file(dir.file("cola.tsv"),
             "gj04\t1\t\tOur friends won't buy this analysis.\ngj04\t0\t*\tThey drank the pub.\n");
  const GlueSplit cola = read_glue_tsv(dir.file("cola.tsv"), glue_task("cola"));
  EXPECT_EQ(cola.examples[1].text_a, "They drank the pub.");
  EXPECT_EQ(cola.examples[1].label, 0);
  write_file(dir.file("cola_test.tsv"), "index\tsentence\n0\tBill whistled past the house.\n");
  GlueReadOptions test_split;
  test_split.labelled = false;
  EXPECT_EQ(read_glue_tsv(dir.file("cola_test.tsv"), glue_task("cola"), test_split).examples[0].label, -1);
  for (const std::string t : {"qqp", "qnli", "rte", "wnli"}) EXPECT_EQ(glue_task(t).name, t);
}

TEST(GlueTsv, MalformedInputNamesFileLineAndFix) {
  TempDir dir;
  const std::string f = dir.file("bad.tsv");
  auto read = [&](const std::string& task, const std::string& text, GlueReadOptions o = {}) {
    write_file(f, text);
    return user_error([&] { read_glue_tsv(f, glue_task(task), o); });
  };
  EXPECT_NE(read("sst2", "sentence\tlbl\nfine\t1\n").find(f + ":1: the header has no column 'label'"),
            std::string::npos);
  EXPECT_NE(read("sst2", "sentence\tlabel\nfine\t1\ntoo\tmany\t1\n").find(f + ":3: 3 tab-separated fields"),
            std::string::npos);
  EXPECT_NE(read("sst2", "sentence\tlabel\nshort row\n").find("fix or remove the row"), std::string::npos);
  EXPECT_NE(read("qnli", "index\tquestion\tsentence\tlabel\n0\tq\ts\tcontradiction\n")
                .find(f + ":2: label 'contradiction' is not one of entailment, not_entailment"),
            std::string::npos);
  EXPECT_NE(read("stsb", "sentence1\tsentence2\tscore\na\tb\tfive\n").find(f + ":2: score 'five'"), std::string::npos);
  EXPECT_NE(read("stsb", "sentence1\tsentence2\tscore\na\tb\tnan\n").find("not a finite number"), std::string::npos);
  EXPECT_NE(read("stsb", "sentence1\tsentence2\tscore\na\tb\t1e999\n").find("not a finite number"), std::string::npos);
  EXPECT_NE(read("stsb", "sentence1\tsentence2\tscore\na\tb\t1e300\n").find(f + ":2: score '1e300' is beyond +-1e9"),
            std::string::npos);
  // A subnormal score (strtod reports ERANGE) is a finite number and reads as itself.
  write_file(f, "sentence1\tsentence2\tscore\na\tb\t1e-320\n");
  EXPECT_EQ(read_glue_tsv(f, glue_task("stsb")).examples[0].score, std::strtod("1e-320", nullptr));
  EXPECT_NE(read("sst2", "sentence\tlabel\n\n").find(f + ": no examples"), std::string::npos);  // empty split
  EXPECT_NE(read("cola", "gj04\t1\tonly three\n").find(f + ":1: 3 tab-separated fields where the task has 4"),
            std::string::npos);
  EXPECT_NE(user_error([] { glue_task("squad"); }).find("known: cola, sst2"), std::string::npos);
  EXPECT_NE(user_error([&] { read_glue_tsv(dir.file("missing.tsv"), glue_task("sst2")); }).find("missing.tsv"),
            std::string::npos);
  // With skip_malformed a cut-off row is counted and skipped; the rest is read.
  GlueReadOptions skip;
  skip.skip_malformed = true;
  write_file(f, "sentence\tlabel\nfine\t1\ncut off\nalso fine\t0\n");
  const GlueSplit s = read_glue_tsv(f, glue_task("sst2"), skip);
  EXPECT_EQ(s.examples.size(), 2u);
  EXPECT_EQ(s.skipped, 1);
}

TEST(Triplets, ReadsCailStyleJsonLinesAndRefusesBadOnes) {
  TempDir dir;
  const std::string f = dir.file("t.jsonl");
  Triplet t;
  t.a = "A text";
  t.b = "B text";
  t.c = "C text";
  t.b_closer = false;
  write_file(f, triplet_json(t) + "\n\n" + R"({"A": "x", "B": "y", "C": "z", "label": "B"})" + "\n");
  const std::vector<Triplet> got = read_triplets(f);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].a, "A text");
  EXPECT_FALSE(got[0].b_closer);
  EXPECT_TRUE(got[1].b_closer);
  EXPECT_EQ(got[1].line, 3);
  auto bad = [&](const std::string& text) {
    write_file(f, text);
    return user_error([&] { read_triplets(f); });
  };
  EXPECT_NE(bad(R"({"A": "x", "B": "y", "label": "B"})").find(f + ":1: no \"C\" field"), std::string::npos);
  EXPECT_NE(bad(R"({"A": "x", "B": "y", "C": "z", "label": "D"})").find("\"label\" must be \"B\" or \"C\""),
            std::string::npos);
  EXPECT_NE(bad("{\"A\": \"x\",\n").find(f + ":1: not a JSON object"), std::string::npos);
  EXPECT_NE(bad(R"({"A": 3, "B": "y", "C": "z", "label": "B"})").find("\"A\" must be a non-empty string"),
            std::string::npos);
  EXPECT_NE(bad("\n").find("no triplets"), std::string::npos);
}

}  // namespace finetune_data_test
