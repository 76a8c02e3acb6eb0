// Attention trained through tile attention with its gradient recomputed in query blocks
// (model/recomputed_attention.h), in double: the op's gradients against autograd through the
// whole explicit attention for any block size; and every family with a tile term (FIRE, CoPE,
// FoX, Transformer-XL, Shaw, DeBERTa, PaTH, PaTH-FoX, the RoPE remaps, stick-breaking) trained
// with model.attention_kernel fused, causal and (FIRE, FoX, Transformer-XL, Shaw, DeBERTa)
// bidirectional, with and without a right padding, against the same
// model on the explicit scores (reference): the loss and every parameter's gradient (padded PaTH,
// which keeps the explicit scores in training, included as the fallback it takes).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "roformer/model/attention_kernel.h"
#include "roformer/model/encoder.h"
#include "roformer/model/recomputed_attention.h"
#include "tiny_models.h"

namespace recomputed_attention_test {

using namespace roformer;

namespace {

// Causal softmax(q k^T / sqrt(D) + bias[i - j]) v for query rows [begin, end), every key.
torch::Tensor biased_rows(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          const torch::Tensor& bias, int64_t begin, int64_t end) {
  const int64_t S = q.size(2);
  const torch::Tensor rows = q.narrow(2, begin, end - begin);
  torch::Tensor scores = torch::matmul(rows, k.transpose(-2, -1)) / std::sqrt(double(q.size(3)));
  const torch::Tensor distance = torch::arange(begin, end).unsqueeze(1) - torch::arange(S).unsqueeze(0);
  scores = scores + bias.index({distance.clamp(0, S - 1)});
  scores = scores.masked_fill(distance < 0, -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), v);
}

struct Grads {
  torch::Tensor out, q, k, v, bias;
};

// The output and the gradients of a fixed random readout of it, through `attend`.
Grads differentiate(const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                                                      const torch::Tensor&)>& attend) {
  torch::manual_seed(4);
  const torch::Tensor q = torch::randn({2, 3, 37, 8}, torch::kFloat64).requires_grad_(true);
  const torch::Tensor k = torch::randn({2, 3, 37, 8}, torch::kFloat64).requires_grad_(true);
  const torch::Tensor v = torch::randn({2, 3, 37, 8}, torch::kFloat64).requires_grad_(true);
  const torch::Tensor bias = torch::randn({37}, torch::kFloat64).requires_grad_(true);
  const torch::Tensor out = attend(q, k, v, bias);
  (out * torch::randn(out.sizes(), torch::kFloat64)).sum().backward();
  return {out.detach(), q.grad(), k.grad(), v.grad(), bias.grad()};
}

void expect_close(const torch::Tensor& got, const torch::Tensor& want, double tol, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_LE((got - want).abs().max().item<double>(), tol) << what;
}

}  // namespace

// Blocks of 1, 7, 16 and all 37 rows: the output of the forward, and the gradients of q, k, v and
// a parameter the rows read (a bias by distance), equal autograd through the whole attention.
TEST(RecomputedAttention, GradientsEqualAutogradThroughTheWholeAttention) {
  const Grads want = differentiate([](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                      const torch::Tensor& bias) { return biased_rows(q, k, v, bias, 0, 37); });
  for (const int64_t block : {1, 7, 16, 37}) {
    SCOPED_TRACE(block);
    const Grads got = differentiate(
        [block](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& bias) {
          model::AttentionForward forward = [bias](const torch::Tensor& fq, const torch::Tensor& fk,
                                                   const torch::Tensor& fv, const torch::Tensor&) {
            EXPECT_FALSE(torch::GradMode::is_enabled());
            return biased_rows(fq, fk, fv, bias, 0, fq.size(2));
          };
          model::AttentionRows rows = [bias](const torch::Tensor& rq, const torch::Tensor& rk, const torch::Tensor& rv,
                                             const torch::Tensor&, int64_t begin,
                                             int64_t end) { return biased_rows(rq, rk, rv, bias, begin, end); };
          return model::attention_with_recomputed_gradient(q, k, v, torch::Tensor(), {bias}, forward, rows, block);
        });
    expect_close(got.out, want.out, 0, "output");
    expect_close(got.q, want.q, 1e-12, "q");
    expect_close(got.k, want.k, 1e-12, "k");
    expect_close(got.v, want.v, 1e-12, "v");
    expect_close(got.bias, want.bias, 1e-12, "bias");
  }
}

namespace {

struct Step {
  torch::Tensor loss;
  std::vector<torch::Tensor> grads;
  std::string kernels;
};

// One training step's loss (a fixed random readout of the output) and parameter gradients, the
// second sequence right-padded to `padded_length` tokens when it is below `tokens`; past
// whole_limit_bytes of scores both paths take their query rows in blocks.
Step train_step(config::ModelConfig c, config::AttentionKernel kernel, int64_t tokens, int64_t padded_length,
                double whole_limit_bytes) {
  c.attention_kernel = kernel;
  auto [m, ids] = tiny_models::double_model(c, tokens);
  m->train();
  m->attention_whole_limit_bytes = whole_limit_bytes;
  model::AttentionKernelProbe probe;
  model::EncoderInput in;
  in.input_ids = ids;
  if (padded_length < tokens) {
    in.attention_mask = torch::ones({2, tokens}, torch::kLong);
    in.attention_mask[1].narrow(0, padded_length, tokens - padded_length).zero_();
  }
  const torch::Tensor out = m->forward(in);
  torch::manual_seed(11);
  const torch::Tensor loss = (out * torch::randn(out.sizes(), torch::kFloat64)).sum();
  loss.backward();
  Step s{loss.detach(), {}, probe.summary()};
  for (const auto& p : m->parameters()) s.grads.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  return s;
}

// fused trains through tile attention and gets reference's loss and gradients (150 tokens; CoPE
// 520, past the short-sequence kernel that takes its term up to 512 unpadded), unpadded, with the
// second sequence padded after 97 tokens, and in blocks of query rows (several in backward).
void expect_trains_in_tiles_as_on_the_explicit_scores(const config::ModelConfig& c) {
  const int64_t tokens = c.position.kind == config::PositionKind::cope ? 520 : 150;
  const double blocks_of_a_sixteenth = 2.0 * 2.0 * 8.0 * double(tokens * tokens) / 4.0;  // a quarter of the scores
  for (const auto& [length, whole_limit] :
       std::vector<std::pair<int64_t, double>>{{tokens, model::AttentionMask::kWholeMaskBytes},
                                               {97, model::AttentionMask::kWholeMaskBytes},
                                               {tokens, blocks_of_a_sixteenth}}) {
    SCOPED_TRACE(std::to_string(length) + " tokens, whole up to " + std::to_string(whole_limit) + " bytes");
    const Step tiled = train_step(c, config::AttentionKernel::fused, tokens, length, whole_limit);
    const Step reference = train_step(c, config::AttentionKernel::reference, tokens, length, whole_limit);
    // PaTH with padding keeps the explicit scores (its walk passes every position); causal FoX
    // under the softmax folds its key bias into the keys in training (the short kernel, or SDPA
    // with the padding's mask).
    const bool explicit_scores = length < tokens && c.position.kind == config::PositionKind::path;
    const bool folded = c.position.kind == config::PositionKind::fox && c.objective == config::Objective::causal_lm &&
                        c.attention_normalizer == config::AttentionNormalizer::softmax;
    EXPECT_EQ(tiled.kernels, folded            ? (length < tokens ? "sdpa-flash" : model::attention_kernel::kShort)
                             : explicit_scores ? model::attention_kernel::kExplicitScores
                                               : model::attention_kernel::kTile);
    EXPECT_EQ(reference.kernels, model::attention_kernel::kExplicitScores);
    EXPECT_LE((tiled.loss - reference.loss).abs().item<double>(), 1e-9);  // a sum over 2 x tokens x 23 outputs
    ASSERT_EQ(tiled.grads.size(), reference.grads.size());
    for (size_t i = 0; i < tiled.grads.size(); ++i) {
      ASSERT_EQ(tiled.grads[i].defined(), reference.grads[i].defined()) << i;
      if (!tiled.grads[i].defined()) continue;
      const double scale = std::max(1.0, reference.grads[i].abs().max().item<double>());
      expect_close(tiled.grads[i], reference.grads[i], 1e-11 * scale, "grad " + std::to_string(i));
    }
  }
}

}  // namespace

// Every model tile attention takes (tiny_models::tile_family_models).
TEST(RecomputedAttention, EveryTileFamilyTrainsThroughTilesAsOnTheExplicitScores) {
  for (const auto& [name, c] : tiny_models::tile_family_models()) {
    SCOPED_TRACE(name);
    expect_trains_in_tiles_as_on_the_explicit_scores(c);
  }
}

// Twenty AdamW steps of every tile family through the tiles (the backward in tiles, or the
// recomputed blocks; CoPE the short kernel at this length) and on the explicit scores, in double:
// the losses agree at every step to rounding, so the two paths train the same model, not merely
// the same first gradient. Release builds only: the one-step tests above run the same code under
// the sanitizers, where twenty steps of every family would add minutes.
TEST(RecomputedAttention, EveryTileFamilyTrainsTwentyStepsInTilesAsOnTheExplicitScores) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "twenty steps per family: release builds only";
#endif
  for (const auto& [name, c] : tiny_models::tile_family_models()) {
    SCOPED_TRACE(name);
    const bool path = c.position.kind == config::PositionKind::path;  // its walk: ten times RoPE's step
    const int64_t tokens = path ? 40 : 64;
    std::vector<std::vector<double>> losses;
    for (const auto kernel : {config::AttentionKernel::fused, config::AttentionKernel::reference}) {
      config::ModelConfig with_kernel = c;
      with_kernel.attention_kernel = kernel;
      auto [m, ids] = tiny_models::double_model(with_kernel, tokens);
      m->train();
      torch::optim::AdamW optimizer(m->parameters(), torch::optim::AdamWOptions(1e-2));
      model::EncoderInput in;
      in.input_ids = ids;
      torch::Tensor readout;
      losses.emplace_back();
      for (int step = 0; step < 20; ++step) {
        optimizer.zero_grad();
        const torch::Tensor out = m->forward(in);
        if (!readout.defined()) {
          torch::manual_seed(12);
          readout = torch::randn(out.sizes(), torch::kFloat64);
        }
        const torch::Tensor loss = (out * readout).mean();
        loss.backward();
        optimizer.step();
        losses.back().push_back(loss.item<double>());
      }
    }
    for (int step = 0; step < 20; ++step)
      EXPECT_NEAR(losses[0][step], losses[1][step], 1e-9 * std::max(1.0, std::abs(losses[1][step]))) << "step " << step;
    EXPECT_GT(std::abs(losses[1][19] - losses[1][0]), 1e-3) << "the twenty steps moved the model";
  }
}

// The same for bidirectional attention (MLM) with every family whose term takes it.
TEST(RecomputedAttention, EveryBidirectionalTileFamilyTrainsThroughTilesAsOnTheExplicitScores) {
  for (const auto& [name, c] : tiny_models::bidirectional_tile_family_models()) {
    SCOPED_TRACE(name);
    expect_trains_in_tiles_as_on_the_explicit_scores(c);
  }
}

// Under auto, a term whose gradient is recomputed (ReRoPE's two rotations) trains in tiles once
// one layer's [B, H, S, S] float scores pass 16 MiB (2 x 2 heads x 1024^2 x 4 bytes is exactly 16
// MiB); PaTH, whose attention in blocks has its backward, trains in them at any length.
TEST(RecomputedAttention, AutoTrainsInTilesPastSixteenMiBOfScores) {
  for (const config::PositionKind kind : {config::PositionKind::rope, config::PositionKind::path}) {
    for (const int64_t tokens : {1024, 1040}) {
      config::ModelConfig c = tiny_models::tiny_causal(kind);
      c.position.rope.mode = config::RopeMode::rerope;
      c.position.rope.rerope.window = 16;
      torch::manual_seed(2);
      model::EncoderModel m = model::build_model(c, 5);
      m->train();
      model::AttentionKernelProbe probe;
      model::EncoderInput in;
      in.input_ids = torch::randint(0, c.vocab_size, {2, tokens}, torch::kLong);
      torch::NoGradGuard no_grad;  // the choice does not depend on autograd
      m->forward(in);
      const bool tiles = tokens > 1024 || kind == config::PositionKind::path;
      EXPECT_EQ(probe.summary(), tiles ? model::attention_kernel::kTile : model::attention_kernel::kExplicitScores)
          << tokens << " tokens, " << (kind == config::PositionKind::path ? "PaTH" : "ReRoPE");
    }
  }
}

// Under auto, a term with a backward in tiles (Transformer-XL, Shaw, DeBERTa, FIRE, and
// stick-breaking over q . k alone) trains in tiles at any length, 64 tokens too, under either
// normaliser; PaTH under softmax (its blocks) but not under stick-breaking (its walk's gradient
// would be recomputed in explicit blocks, slower than its explicit scores).
// PaTH's blocks take blocks and head dims that are multiples of 8: with a block of 12 its training
// keeps the explicit scores (its walk's recomputed gradient would be slower).
TEST(RecomputedAttention, PathWithABlockItsKernelDoesNotTakeTrainsOnItsExplicitScores) {
  for (const int64_t block : {12, 16}) {
    config::ModelConfig c = tiny_models::tiny_causal(config::PositionKind::path);
    c.position.path.block = block;
    torch::manual_seed(2);
    model::EncoderModel m = model::build_model(c, 5);
    m->train();
    model::AttentionKernelProbe probe;
    model::EncoderInput in;
    in.input_ids = torch::randint(0, c.vocab_size, {2, 40}, torch::kLong);
    m->forward(in);
    EXPECT_EQ(probe.summary(), block == 12 ? model::attention_kernel::kExplicitScores : model::attention_kernel::kTile)
        << "block " << block;
  }
}

TEST(RecomputedAttention, AutoTrainsATermWithABackwardInTilesInTilesAtAnyLength) {
  for (const config::PositionKind kind :
       {config::PositionKind::transformer_xl, config::PositionKind::shaw, config::PositionKind::deberta,
        config::PositionKind::fire, config::PositionKind::none, config::PositionKind::path})
    for (const bool sticks : {false, true}) {
      if (kind == config::PositionKind::none && !sticks) continue;  // NoPE alone takes no scores path
      config::ModelConfig c = tiny_models::tiny_causal(kind);
      if (sticks) c.attention_normalizer = config::AttentionNormalizer::stick_breaking;
      torch::manual_seed(2);
      model::EncoderModel m = model::build_model(c, 5);
      m->train();
      model::AttentionKernelProbe probe;
      model::EncoderInput in;
      in.input_ids = torch::randint(0, c.vocab_size, {2, 64}, torch::kLong);
      m->forward(in);
      const bool tiles = kind != config::PositionKind::path || !sticks;
      EXPECT_EQ(probe.summary(), tiles ? model::attention_kernel::kTile : model::attention_kernel::kExplicitScores)
          << config::position_kind_names().name(kind) << (sticks ? " with stick-breaking" : "");
    }
}

// With attention dropout, or a left padding, training keeps the explicit scores.
TEST(RecomputedAttention, DropoutAndLeftPaddingKeepTheExplicitScores) {
  config::ModelConfig c = tiny_models::tiny_causal(config::PositionKind::fire);
  c.attention_kernel = config::AttentionKernel::fused;
  {
    config::ModelConfig with_dropout = c;
    with_dropout.attention_dropout = 0.1;
    auto [m, ids] = tiny_models::double_model(with_dropout, 64);
    m->train();
    model::AttentionKernelProbe probe;
    model::EncoderInput in;
    in.input_ids = ids;
    m->forward(in).sum().backward();
    EXPECT_EQ(probe.summary(), model::attention_kernel::kExplicitScores);
  }
  auto [m, ids] = tiny_models::double_model(c, 64);
  m->train();
  model::AttentionKernelProbe probe;
  model::EncoderInput in;
  in.input_ids = ids;
  in.attention_mask = torch::ones({2, 64}, torch::kLong);
  in.attention_mask[1].narrow(0, 0, 5).zero_();
  m->forward(in).sum().backward();
  EXPECT_EQ(probe.summary(), model::attention_kernel::kExplicitScores);
}

}  // namespace recomputed_attention_test
