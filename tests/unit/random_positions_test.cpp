// Randomized positions (train.positions: random; Ruoss et al. 2023): the draws are sorted,
// distinct, inside [0, max) and each position is drawn with probability S / max (Floyd's
// sampling, checked by frequency over many keys); they are a pure function of (seed, step,
// global row), so a batch split over ranks draws the same rows as one process. Explicit
// positions reach every family that takes them: 0..S-1 given explicitly equals the default, a
// shift of every position leaves the relative families unchanged (RoPE, Shaw, Transformer-XL,
// DeBERTa, xPos) and changes the absolute ones and FIRE. The config refuses the families whose
// positions are implicit.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>
#include <string>
#include <vector>

#include "attention_reference.h"
#include "roformer/common/errors.h"
#include "roformer/config/config_loader.h"
#include "roformer/data/random_positions.h"
#include "roformer/model/encoder.h"
#include "test_support.h"

namespace random_positions_test {

using namespace roformer;
using config::PositionKind;

TEST(RandomPositions, SortedDistinctInsideTheRangeAndKeyedBySeedStepAndRow) {
  for (int64_t max : {8, 64, 1000}) {
    for (int64_t S : {int64_t{1}, int64_t{5}, max / 2, max}) {
      const std::vector<int64_t> p = data::draw_sorted_positions(S, max, 7, 3, 11);
      ASSERT_EQ(static_cast<int64_t>(p.size()), S);
      for (size_t i = 0; i < p.size(); ++i) {
        EXPECT_GE(p[i], 0);
        EXPECT_LT(p[i], max);
        if (i > 0) {
          EXPECT_LT(p[i - 1], p[i]) << "sorted and distinct";
        }
      }
      EXPECT_EQ(p, data::draw_sorted_positions(S, max, 7, 3, 11));
      if (S == max) {
        EXPECT_EQ(p.back(), max - 1);  // every position
      }
    }
  }
  const auto a = data::draw_sorted_positions(16, 4096, 7, 3, 11);
  EXPECT_NE(a, data::draw_sorted_positions(16, 4096, 8, 3, 11));
  EXPECT_NE(a, data::draw_sorted_positions(16, 4096, 7, 4, 11));
  EXPECT_NE(a, data::draw_sorted_positions(16, 4096, 7, 3, 12));
  EXPECT_THROW(data::draw_sorted_positions(9, 8, 7, 3, 11), c10::Error);
}

// Uniform S-subsets: each position is in the draw with probability S / max. 20,000 draws of 4
// from 10: frequency 0.4 with standard error 0.0035; allow 6 of them.
TEST(RandomPositions, EveryPositionIsDrawnWithProbabilitySOverMax) {
  const int64_t S = 4, max = 10, draws = 20000;
  std::vector<double> count(static_cast<size_t>(max), 0.0);
  std::set<std::vector<int64_t>> subsets;
  for (int64_t row = 0; row < draws; ++row) {
    const auto p = data::draw_sorted_positions(S, max, 1234, 0, row);
    for (int64_t v : p) count[static_cast<size_t>(v)] += 1;
    subsets.insert(p);
  }
  for (int64_t v = 0; v < max; ++v) EXPECT_NEAR(count[static_cast<size_t>(v)] / draws, 0.4, 0.021) << "position " << v;
  EXPECT_EQ(subsets.size(), 210u) << "every one of the C(10, 4) subsets occurs";
}

TEST(RandomPositions, RowsAreKeyedByTheirGlobalIndex) {
  const torch::Tensor all = data::random_positions({0, 1, 2, 3}, 6, 50, 9, 2);
  const torch::Tensor half = data::random_positions({2, 3}, 6, 50, 9, 2);
  EXPECT_TRUE(torch::equal(all.narrow(0, 2, 2), half));
  EXPECT_EQ(all.sizes(), (std::vector<int64_t>{4, 6}));
}

namespace {

// Final hidden states in double of a small encoder of `kind` for ids [2, 12] at `positions`.
torch::Tensor hidden(PositionKind kind, const torch::Tensor& positions) {
  config::ModelConfig c = attention_reference::small_model(kind, /*causal=*/false);
  c.hidden_dropout = 0;
  c.position.max_positions = 64;
  model::EncoderModel m = model::build_model(c, 5);
  m->to(torch::kFloat64);
  m->eval();
  torch::manual_seed(3);
  const torch::Tensor ids = torch::randint(8, 200, {2, 12}, torch::kLong);
  torch::NoGradGuard no_grad;
  return m->forward({ids, {}, {}, positions});
}

}  // namespace

TEST(RandomPositions, ExplicitPositionsReachEveryFamilyThatTakesThem) {
  const torch::Tensor base = torch::arange(12, torch::kLong).repeat({2, 1});  // [2, 12]
  const torch::Tensor shifted = base + torch::tensor({{7}, {23}}, torch::kLong);
  for (PositionKind kind :
       {PositionKind::rope, PositionKind::xpos, PositionKind::shaw, PositionKind::transformer_xl, PositionKind::deberta,
        PositionKind::sinusoidal, PositionKind::learned, PositionKind::fire}) {
    SCOPED_TRACE(static_cast<int>(kind));
    const torch::Tensor implicit = hidden(kind, {});
    EXPECT_TRUE(torch::allclose(hidden(kind, base), implicit, 1e-10, 1e-12)) << "0..S-1 given explicitly";
    const double moved = (hidden(kind, shifted) - implicit).abs().max().item<double>();
    if (kind == PositionKind::sinusoidal || kind == PositionKind::learned) {
      EXPECT_GT(moved, 1e-3) << "absolute positions move the output";
    } else if (kind == PositionKind::fire) {
      EXPECT_GT(moved, 1e-5) << "FIRE divides by psi(max(i, L)): the query's own position matters";
    } else {
      EXPECT_LT(moved, 1e-9) << "a shift of every position leaves offsets, and so the output, unchanged";
    }
  }
}

TEST(RandomPositions, TheConfigRefusesFamiliesWithImplicitPositions) {
  roformer::testing::TempDir dir;
  const std::string path = dir.file("c.yaml");
  auto load = [&](const std::string& body) {
    roformer::testing::write_file(path, "model:\n  position:\n    " + body + "\ntrain:\n  positions: random\n");
    return config::load_config(path, {});
  };
  for (const char* kind : {"alibi", "t5_bias", "kerple", "sandwich", "none"})
    EXPECT_THROW(load(std::string("kind: ") + kind), UserError) << kind;
  EXPECT_NO_THROW(load("kind: rope"));
  EXPECT_NO_THROW(load("kind: fire"));
  try {
    load("kind: learned\n    max_positions: 100");  // default maximum: 2 x 128 = 256 > 100
    ADD_FAILURE() << "a learned table smaller than the drawn range was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("model.position.max_positions"), std::string::npos) << e.what();
  }
  const config::LoadedConfig ok = load("kind: rope");
  EXPECT_GE(ok.config.train.random_positions_max, 2 * ok.config.data.seq_len);
}

}  // namespace random_positions_test
