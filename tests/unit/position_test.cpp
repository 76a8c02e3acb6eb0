// Position families other than RoPE against independently computed values: T5 buckets and
// ALiBi slopes (tables from the definitions, source noted), the sinusoidal formula, the learned
// table's limit, and the bias shapes the encoder relies on. Also the table cache: one table,
// or one per key once a CUDA graph may read them.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "roformer/common/errors.h"
#include "roformer/config/config_loader.h"
#include "roformer/config/position_families.h"
#include "roformer/model/attention_mask.h"
#include "roformer/model/position/absolute.h"
#include "roformer/model/position/relative_bias.h"
#include "roformer/model/position/table_cache.h"

namespace position_test {

using namespace roformer;
using namespace roformer::model;

TEST(T5Bias, BucketsMatchTheReferenceTable) {
  // (relative = key - query, bidirectional bucket, causal bucket) for num_buckets 32,
  // max_distance 128, computed from HF T5Attention._relative_position_bucket (research notes §3.3).
  struct Row {
    int64_t rel, bidirectional, causal;
  };
  const std::vector<Row> table{{0, 0, 0},       {-1, 1, 1},    {1, 17, 0},     {-7, 7, 7},
                               {-8, 8, 8},      {-15, 9, 15},  {-16, 10, 16},  {-31, 11, 21},
                               {-32, 12, 21},   {-64, 14, 26}, {-127, 15, 31}, {-128, 15, 31},
                               {-1000, 15, 31}, {8, 24, 0},    {16, 26, 0},    {128, 31, 0}};
  for (const Row& r : table) {
    const torch::Tensor rel = torch::tensor({r.rel}, torch::kLong);
    EXPECT_EQ(t5_relative_bucket(rel, true, 32, 128).item<int64_t>(), r.bidirectional) << "rel=" << r.rel;
    EXPECT_EQ(t5_relative_bucket(rel, false, 32, 128).item<int64_t>(), r.causal) << "rel=" << r.rel;
  }
}

TEST(T5Bias, BiasIsPerHeadAndSharedLookup) {
  config::T5BiasConfig c;
  T5BiasImpl t5(c, 3, true);
  const torch::Tensor bias = toeplitz_rows(t5.relative_bias(5, torch::kCPU), 0, 5).unsqueeze(0);
  ASSERT_EQ(bias.sizes(), (std::vector<int64_t>{1, 3, 5, 5}));
  // bias[0, h, i, j] = weight[bucket(j - i), h]
  const torch::Tensor w = t5.relative_attention_bias->weight;
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      const int64_t b = t5_relative_bucket(torch::tensor({j - i}, torch::kLong), true, 32, 128).item<int64_t>();
      for (int64_t h = 0; h < 3; ++h) EXPECT_EQ(bias[0][h][i][j].item<float>(), w[b][h].item<float>());
    }
}

TEST(Alibi, SlopesMatchThePaperAndTheNonPowerOfTwoRule) {
  // 8 heads: 1/2 ... 1/256 (Press et al. 2022). 12 heads: the 8-head slopes, then every other
  // slope of the 16-head sequence (official code / BLOOM build_alibi_tensor; research notes §3.6).
  const std::vector<double> s8 = alibi_slopes(8);
  for (int64_t h = 0; h < 8; ++h) EXPECT_DOUBLE_EQ(s8[h], std::pow(0.5, h + 1));
  const std::vector<double> expect12{0.5,       0.25,       0.125,      0.0625,     0.03125,    0.015625,
                                     0.0078125, 0.00390625, 0.70710678, 0.35355339, 0.17677670, 0.08838835};
  const std::vector<double> s12 = alibi_slopes(12);
  ASSERT_EQ(s12.size(), 12u);
  for (size_t h = 0; h < 12; ++h) EXPECT_NEAR(s12[h], expect12[h], 1e-8);
  const std::vector<double> s16 = alibi_slopes(16);
  EXPECT_NEAR(s16[0], std::pow(2.0, -0.5), 1e-15);
  EXPECT_NEAR(s16[15], std::pow(2.0, -8.0), 1e-15);
  EXPECT_EQ(alibi_slopes(1), std::vector<double>{std::pow(2.0, -8.0)});
}

TEST(Alibi, BiasIsMinusSlopeTimesDistance) {
  AlibiImpl alibi(4);
  const torch::Tensor bias = toeplitz_rows(alibi.relative_bias(6, torch::kCPU), 0, 6).unsqueeze(0);
  ASSERT_EQ(bias.sizes(), (std::vector<int64_t>{1, 4, 6, 6}));
  const std::vector<double> slopes = alibi_slopes(4);
  for (int64_t h = 0; h < 4; ++h)
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 6; ++j) EXPECT_DOUBLE_EQ(bias[0][h][i][j].item<double>(), -slopes[h] * std::abs(i - j));
}

TEST(Sinusoidal, EqualsTheFormula) {
  const int64_t D = 16;
  const torch::Tensor table = sinusoidal_table(torch::arange(50, torch::kLong), D, torch::kFloat64);
  for (int64_t pos = 0; pos < 50; pos += 7)
    for (int64_t i = 0; i < D / 2; ++i) {
      const double a = pos / std::pow(10000.0, 2.0 * i / D);
      EXPECT_NEAR(table[pos][2 * i].item<double>(), std::sin(a), 1e-13);
      EXPECT_NEAR(table[pos][2 * i + 1].item<double>(), std::cos(a), 1e-13);
    }
  SinusoidalPositionImpl pe(D);
  const torch::Tensor x = torch::zeros({2, 50, D}, torch::kFloat64);
  EXPECT_TRUE(torch::equal(pe.embed(x, torch::arange(50, torch::kLong))[1], table));
}

TEST(Learned, AddsTheTableAndRefusesPositionsPastItsEnd) {
  LearnedPositionImpl pe(8, 4);
  const torch::Tensor x = torch::zeros({1, 8, 4});
  EXPECT_TRUE(torch::equal(pe.embed(x, torch::arange(8, torch::kLong))[0], pe.table->weight));
  const config::ModelConfig m =
      config::load_overrides({"model.position.kind=learned", "model.position.max_positions=8", "data.seq_len=8"})
          .config.model;
  EXPECT_EQ(config::position_length_limit(m), 8) << "the family row states the table's limit";
  try {
    pe.embed(torch::zeros({1, 9, 4}), torch::arange(9, torch::kLong));
    FAIL() << "expected an error past the table";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("8 rows"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sequence length 9"), std::string::npos) << e.what();
  }
}

namespace {

// Builds a distinct table per call and counts the calls.
struct CountingBuild {
  int calls = 0;
  torch::Tensor operator()() { return torch::full({4}, static_cast<double>(++calls), torch::kFloat64); }
};

// Sets TableCache::keep_every_table for one test and restores it after.
struct KeepTables {
  explicit KeepTables(bool keep) : before(TableCache::keeps_every_table()) { TableCache::keep_every_table(keep); }
  ~KeepTables() { TableCache::keep_every_table(before); }
  bool before;
};

}  // namespace

// Each family's traits say what attention may do with it: form the scores itself, fuse the
// rotation (with RoPE's tables, or with none when nothing rotates), or neither.
TEST(PositionTraits, EachFamilySaysHowAttentionMayUseIt) {
  using Rotation = PositionEncodingImpl::Rotation;
  struct Want {
    std::string kind;
    std::vector<std::string> set;
    bool forms_scores;
    Rotation rotation;
  };
  const std::vector<Want> wants{
      {"rope", {}, false, Rotation::tables},
      {"rope",
       {"model.position.rope.mode=rerope", "model.position.rope.rerope.window=8"},
       true,
       Rotation::none},  // ReRoPE
      {"xpos", {}, false, Rotation::applied},
      {"sinusoidal", {}, false, Rotation::none},
      {"learned", {}, false, Rotation::none},
      {"none", {}, false, Rotation::none},
      {"t5_bias", {}, false, Rotation::applied},
      {"alibi", {}, false, Rotation::applied},
      {"kerple", {}, false, Rotation::applied},
      {"sandwich", {}, false, Rotation::applied},
      {"shaw", {}, true, Rotation::applied},
      {"transformer_xl", {}, true, Rotation::applied},
      {"deberta", {}, true, Rotation::applied},
      {"fire", {}, true, Rotation::applied},
      {"cope", {"model.objective=causal_lm"}, true, Rotation::applied},
  };
  for (const Want& w : wants) {
    std::vector<std::string> set = w.set;
    set.push_back("model.position.kind=" + w.kind);
    const config::ModelConfig m = config::load_overrides(set).config.model;
    SCOPED_TRACE(w.kind + (w.set.empty() ? "" : " " + w.set.front()));
    const auto pe = make_position_encoding(m);
    EXPECT_EQ(pe->traits().forms_scores, w.forms_scores);
    EXPECT_EQ(pe->traits().rotation, w.rotation);
    EXPECT_EQ(config::position_length_limit(m), w.kind == "learned" ? m.position.max_positions : 0);
  }
}

TEST(TableCache, HoldsOneTableSoLongEvaluationStaysBounded) {
  const KeepTables single(false);
  TableCache cache;
  CountingBuild build;
  auto get = [&](int64_t length, torch::ScalarType dtype) {
    return cache.get(torch::kCPU, length, dtype, [&] { return build(); });
  };
  const torch::Tensor a = get(8, torch::kFloat);
  EXPECT_EQ(get(8, torch::kFloat).data_ptr(), a.data_ptr());  // a hit: the same storage
  EXPECT_EQ(build.calls, 1);
  get(8, torch::kBFloat16);  // another dtype replaces it
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(a.use_count(), 1) << "the replaced table must be released";
  EXPECT_NE(get(8, torch::kFloat).data_ptr(), a.data_ptr());
  EXPECT_EQ(build.calls, 3);
  get(16, torch::kFloat);  // another length
  cache.get(
      torch::kCPU, 16, torch::kFloat, [&] { return build(); }, 0, 4);  // a block of rows
  EXPECT_EQ(build.calls, 5);
  EXPECT_EQ(cache.size(), 1u);
}

// After a capture the graph reads the tables it was captured with: an fp32 validation pass
// after bf16 training must not free the bf16 table, and training's next eager step finds it.
TEST(TableCache, KeepsEveryTableOnceACudaGraphMayReadThem) {
  const KeepTables keep(true);
  TableCache cache;
  CountingBuild build;
  auto get = [&](torch::ScalarType dtype) { return cache.get(torch::kCPU, 8, dtype, [&] { return build(); }); };
  const torch::Tensor training = get(torch::kBFloat16);
  const void* address = training.data_ptr();
  const torch::Tensor validation = get(torch::kFloat);
  EXPECT_GT(training.use_count(), 1) << "the cache must still hold the table the graph reads";
  EXPECT_EQ(get(torch::kBFloat16).data_ptr(), address);
  EXPECT_EQ(get(torch::kFloat).data_ptr(), validation.data_ptr());
  EXPECT_EQ(build.calls, 2);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(get(torch::kBFloat16)[0].item<double>(), 1.0);  // the first table's values
}

}  // namespace position_test
