// Tile attention without the causal mask (bidirectional, as MLM attends) against the explicit
// math in double: softmax(q k^T scale + term + padding mask) v over every key, the term gathered
// from its tables pair by pair (relative tables with rows for the keys after the query, clipped
// tables whose rows stop changing on both sides, bucketed tables), FIRE's two MLPs evaluated as
// Linear-ReLU-Linear on its formula's inputs, FoX's decay both ways; right padding as key
// lengths; float at one thread and two; the terms defined for causal attention only refused, and
// the plan's choice for a bidirectional pass; and the MLM models of those families evaluated through it against
// model.attention_kernel reference (their training through it: recomputed_attention_test.cpp).
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "roformer/model/attention_kernel.h"
#include "roformer/model/attention_plan.h"
#include "roformer/model/encoder.h"
#include "roformer/model/position/fire.h"
#include "roformer/ops/tile_attention/tile_attention.h"
#include "tiny_models.h"

namespace tile_attention_bidirectional_test {

using namespace roformer;
using ops::TileTerm;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const std::vector<int64_t> kLengths{1, 5, 47, 48, 49, 131, 300};

// [B, H, S, D] views of [B, S, H, D] memory in double, as attention hands them over.
torch::Tensor heads(int64_t B, int64_t H, int64_t S, int64_t D) {
  return torch::randn({B, S, H, D}, torch::kFloat64).transpose(1, 2);
}

// Key lengths of the two batch rows: all S, and a right padding from S - 130 on (at least 1).
torch::Tensor key_lengths(int64_t S) {
  return torch::tensor({S, std::max<int64_t>(1, S - 130)}, torch::kLong);
}

// softmax(q k^T / sqrt(D) + term, padded keys -inf) over every key, then v; the weights too.
struct Explicit {
  torch::Tensor out, probs;
};
Explicit attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& term,
                const torch::Tensor& lengths) {
  const int64_t S = q.size(2);
  torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(q.size(3)));
  if (term.defined()) scores = scores + term;
  if (lengths.defined()) {
    const torch::Tensor padded = (torch::arange(S).unsqueeze(0) >= lengths.unsqueeze(1)).view({-1, 1, 1, S});
    scores = scores.masked_fill(padded, -kInf);
  }
  const torch::Tensor probs = torch::softmax(scores, -1);
  return {torch::matmul(probs, v), probs};
}

// i - j for every pair, [S, S].
torch::Tensor query_minus_key(int64_t S) {
  return torch::arange(S).unsqueeze(1) - torch::arange(S).unsqueeze(0);
}

// The tile op bidirectionally against `want`, with and without the right padding.
void expect_bidirectional(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const TileTerm& term,
                          const std::function<torch::Tensor(const torch::Tensor& lengths)>& want,
                          const std::string& what) {
  const double scale = 1.0 / std::sqrt(double(q.size(3)));
  for (const bool padded : {false, true}) {
    const torch::Tensor lengths = padded ? key_lengths(q.size(2)) : torch::Tensor();
    const torch::Tensor got = ops::tile_attention(q, k, v, scale, false, term, ops::TileNormalizer::softmax, lengths);
    EXPECT_LE((got - want(lengths)).abs().max().item<double>(), 1e-12) << what << (padded ? ", padded" : "");
  }
}

// A relative term over distances -origin .. S - 1: the term and the value term gathered pair by pair.
void expect_relative(const ops::RelativeTerm& r, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     const std::string& what) {
  const int64_t S = q.size(2), H = q.size(1), D = q.size(3);
  const torch::Tensor index = (query_minus_key(S) + r.origin).reshape(-1);
  const torch::Tensor rows = r.table.index_select(1, index).view({H, S, S, D});
  const torch::Tensor term = (r.q.unsqueeze(3) * rows.unsqueeze(0)).sum(-1) / std::sqrt(double(D));
  const torch::Tensor values = r.value_table.index_select(1, index).view({H, S, S, D});
  expect_bidirectional(
      q, k, v, TileTerm{r},
      [&](const torch::Tensor& lengths) {
        const Explicit e = attend(q, k, v, term, lengths);
        return e.out + (e.probs.unsqueeze(-1) * values.unsqueeze(0)).sum(3);
      },
      what);
}

}  // namespace

// Transformer-XL's form with Shaw's value table: a table row per distance from -(S - 1) to S - 1.
TEST(TileAttentionBidirectional, RelativeTableEqualsTheGatheredProductsInDouble) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(31);
  for (const int64_t S : kLengths) {
    const torch::Tensor q = heads(2, 3, S, 8), k = heads(2, 3, S, 8), v = heads(2, 3, S, 8);
    ops::RelativeTerm r;
    r.q = heads(2, 3, S, 8);
    r.origin = S - 1;
    r.table = torch::randn({3, 2 * S + 3, 8}, torch::kFloat64);  // rows past 2S - 1 unused
    r.value_table = torch::randn({3, 2 * S - 1, 8}, torch::kFloat64);
    expect_relative(r, q, k, v, "S " + std::to_string(S));
  }
}

// Shaw's clipped tables: every distance past the clip on either side has the clip's row, so tiles
// wholly beyond it take one product per row; causal (origin 0) and bidirectional.
TEST(TileAttentionBidirectional, ClippedTablesEqualTheGatheredProductsOnBothSides) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(32);
  for (const int64_t S : {5, 131, 300})
    for (const int64_t clip : {1, 4, 60}) {
      const torch::Tensor q = heads(2, 3, S, 8), k = heads(2, 3, S, 8), v = heads(2, 3, S, 8);
      const torch::Tensor base = torch::randn({3, 2 * clip + 1, 8}, torch::kFloat64),
                          base_values = torch::randn({1, 2 * clip + 1, 8}, torch::kFloat64);
      ops::RelativeTerm r;
      r.q = heads(2, 3, S, 8);
      r.origin = S - 1;
      const torch::Tensor row = clip - torch::arange(-r.origin, S).clamp(-clip, clip);  // Shaw's row of i - j
      r.table = base.index_select(1, row);
      r.value_table = base_values.index_select(1, row).expand({3, 2 * S - 1, 8});  // heads share it
      expect_relative(r, q, k, v, "S " + std::to_string(S) + " clip " + std::to_string(clip));
      // Causal: the rows from distance 0 on, against the causal explicit attention.
      ops::RelativeTerm causal = r;
      causal.origin = 0;
      causal.table = r.table.narrow(1, S - 1, S);
      causal.value_table = r.value_table.narrow(1, S - 1, S);
      const torch::Tensor d = query_minus_key(S);
      const torch::Tensor index = d.clamp_min(0).reshape(-1);
      const torch::Tensor term =
          (r.q.unsqueeze(3) * causal.table.index_select(1, index).view({3, S, S, 8}).unsqueeze(0)).sum(-1) /
          std::sqrt(8.0);
      const torch::Tensor future = (d < 0).view({1, 1, S, S});
      const Explicit e = attend(q, k, v, term.masked_fill(future, -kInf), {});
      const torch::Tensor values = causal.value_table.index_select(1, index).view({3, S, S, 8});
      const torch::Tensor want = e.out + (e.probs.unsqueeze(-1) * values.unsqueeze(0)).sum(3);
      const torch::Tensor got = ops::tile_attention(q, k, v, 1.0 / std::sqrt(8.0), true, TileTerm{causal});
      EXPECT_LE((got - want).abs().max().item<double>(), 1e-12) << "causal, S " << S << " clip " << clip;
    }
}

// DeBERTa's form: bucket indices over distances -(S - 1) .. S - 1 that stop changing on both sides.
TEST(TileAttentionBidirectional, BucketsEqualTheGatheredTablesInDouble) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(33);
  for (const int64_t S : kLengths) {
    const torch::Tensor q = heads(2, 3, S, 8), k = heads(2, 3, S, 8), v = heads(2, 3, S, 8);
    ops::BucketTerm t;
    t.by_query = torch::randn({2, 3, S, 6}, torch::kFloat64);
    t.by_key = torch::randn({2, 3, 6, S}, torch::kFloat64);
    t.origin = S - 1;
    const torch::Tensor d = torch::arange(-t.origin, S);
    t.query_bucket = torch::div(d, 7, "floor").clamp(-2, 2) + 3;  // constant past 14 before and 21 after
    t.key_bucket = 2 - torch::div(d, 3, "floor").clamp(-2, 2);    // constant past 6 and 9
    const torch::Tensor index = (query_minus_key(S) + t.origin).reshape(-1);
    const torch::Tensor qb = t.query_bucket.index_select(0, index).view({1, 1, S, S}).expand({2, 3, S, S});
    const torch::Tensor kb = t.key_bucket.index_select(0, index).view({1, 1, S, S}).expand({2, 3, S, S});
    const torch::Tensor term = (t.by_query.gather(3, qb) + t.by_key.gather(2, kb)) / std::sqrt(8.0);
    expect_bidirectional(
        q, k, v, TileTerm{t}, [&](const torch::Tensor& lengths) { return attend(q, k, v, term, lengths).out; },
        "S " + std::to_string(S));
  }
}

// FIRE bidirectionally: keys at or before the query through the past MLP with x = psi(i - j) /
// (psi(max(i, L)) + eps), keys after it through the future MLP with x = psi(j - i) /
// (psi(max(S - 1 - i, L)) + eps), each MLP evaluated as written (Linear, ReLU, Linear).
TEST(TileAttentionBidirectional, FireTermEqualsItsTwoMlpsInDouble) {
  torch::NoGradGuard no_grad;
  model::FireMlp past = tiny_models::fire_mlp_with_flat_units(3, torch::kFloat64);
  torch::manual_seed(34);
  model::FireMlp future(10, 3);
  future->to(torch::kFloat64);
  past->out->weight.mul_(4.0);
  future->out->weight.mul_(4.0);
  const model::FireMlpImpl::Piecewise p = past->piecewise(torch::kFloat64), f = future->piecewise(torch::kFloat64);
  for (const int64_t S : kLengths)
    for (const auto& [c, L] : std::vector<std::pair<double, double>>{{0.1, 8.0}, {-0.3, 20.0}, {0.05, 1000.0}}) {
      ops::FireTerm fire{c, L, model::FireImpl::kEps, p.kinks, p.slope, p.intercept, f.kinks, f.slope, f.intercept};
      const torch::Tensor q = heads(2, 3, S, 8), k = heads(2, 3, S, 8), v = heads(2, 3, S, 8);
      const torch::Tensor d = query_minus_key(S).to(torch::kFloat64);
      const torch::Tensor i = torch::arange(S, torch::kFloat64).unsqueeze(1);
      auto psi = [&](const torch::Tensor& x) { return torch::log1p((c * x).abs()); };
      const torch::Tensor x_past = psi(d) / (psi(i.clamp_min(L)) + model::FireImpl::kEps);
      const torch::Tensor x_future = psi(-d) / (psi((S - 1 - i).clamp_min(L)) + model::FireImpl::kEps);
      const torch::Tensor bias = torch::where((d < 0).unsqueeze(-1), future->forward(x_future), past->forward(x_past));
      const torch::Tensor term = bias.permute({2, 0, 1}).unsqueeze(0);  // [1, H, S, S]
      expect_bidirectional(
          q, k, v, TileTerm{fire}, [&](const torch::Tensor& lengths) { return attend(q, k, v, term, lengths).out; },
          "S " + std::to_string(S) + " c " + std::to_string(c) + " L " + std::to_string(L));
    }
}

// FoX bidirectionally: the decay -|c_i - c_j| both ways.
TEST(TileAttentionBidirectional, FoxDecaysBothWaysInDouble) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(35);
  for (const int64_t S : kLengths) {
    const torch::Tensor q = heads(2, 3, S, 8), k = heads(2, 3, S, 8), v = heads(2, 3, S, 8);
    const torch::Tensor c = torch::log_sigmoid(torch::randn({2, 3, S}, torch::kFloat64) + 2).cumsum(-1);
    const torch::Tensor term = -(c.unsqueeze(-1) - c.unsqueeze(-2)).abs();
    expect_bidirectional(
        q, k, v, TileTerm{ops::FoxTerm{c}},
        [&](const torch::Tensor& lengths) { return attend(q, k, v, term, lengths).out; }, "S " + std::to_string(S));
  }
}

// Float at one thread and two: the same bits, near double.
TEST(TileAttentionBidirectional, FloatFollowsDoubleAtAnyThreadCount) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(36);
  const int64_t S = 301;
  const torch::Tensor q = heads(2, 4, S, 32), k = heads(2, 4, S, 32), v = heads(2, 4, S, 32);
  ops::RelativeTerm r{heads(2, 4, S, 32), torch::randn({4, 2 * S - 1, 32}, torch::kFloat64),
                      torch::randn({4, 2 * S - 1, 32}, torch::kFloat64), S - 1};
  auto in = [&](torch::Dtype dt) {
    ops::RelativeTerm t{r.q.to(dt), r.table.to(dt), r.value_table.to(dt), r.origin};
    return ops::tile_attention(q.to(dt), k.to(dt), v.to(dt), 0.2, false, TileTerm{t});
  };
  const torch::Tensor want = in(torch::kFloat64);
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const torch::Tensor one = in(torch::kFloat32);
  at::set_num_threads(2);
  const torch::Tensor two = in(torch::kFloat32);
  at::set_num_threads(threads);
  EXPECT_LE((one.to(torch::kFloat64) - want).abs().max().item<double>(), 1e-4);
  EXPECT_TRUE(torch::equal(one, two)) << "the thread count changed the bits";
}

// CoPE and PaTH are causal by definition; a table or buckets without the rows after the query,
// and FIRE without its future MLP, cannot serve bidirectional attention.
TEST(TileAttentionBidirectional, RefusesWhatOnlyServesCausalAttention) {
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::randn({1, 2, 9, 8}, torch::kFloat64);
  EXPECT_THROW(ops::tile_attention(x, x, x, 1.0, false, TileTerm{ops::CopeTerm{torch::zeros({1, 2, 9, 4})}}),
               c10::Error);
  EXPECT_THROW(ops::tile_attention(x, x, x, 1.0, false, TileTerm{ops::PathTerm{torch::zeros({1, 2, 9, 10})}}),
               c10::Error);
  ops::RelativeTerm r{x, torch::randn({2, 17, 8}, torch::kFloat64), {}, 7};  // origin 7 < S - 1
  EXPECT_THROW(ops::tile_attention(x, x, x, 1.0, false, TileTerm{r}), c10::Error);
  r.origin = 8;
  EXPECT_NO_THROW(ops::tile_attention(x, x, x, 1.0, false, TileTerm{r}));
  ops::BucketTerm b{torch::zeros({1, 2, 9, 4}, torch::kFloat64), torch::zeros({1, 2, 4, 9}, torch::kFloat64),
                    torch::zeros({9}, torch::kLong), torch::zeros({9}, torch::kLong)};
  EXPECT_THROW(ops::tile_attention(x, x, x, 1.0, false, TileTerm{b}), c10::Error);  // origin 0
  EXPECT_NO_THROW(ops::tile_attention(x, x, x, 1.0, true, TileTerm{b}));
  const model::FireMlpImpl::Piecewise p =
      tiny_models::fire_mlp_with_flat_units(2, torch::kFloat64)->piecewise(torch::kFloat64);
  ops::FireTerm fire{0.1, 8.0, 1e-6, p.kinks.detach(), p.slope.detach(), p.intercept.detach()};
  EXPECT_THROW(ops::tile_attention(x, x, x, 1.0, false, TileTerm{fire}), c10::Error);
  EXPECT_NO_THROW(ops::tile_attention(x, x, x, 1.0, true, TileTerm{fire}));
}

// The plan takes tiles for a bidirectional pass only with a term that serves keys after the query
// and the softmax (stick-breaking is causal), padding at most; otherwise the explicit scores.
TEST(TileAttentionBidirectional, ThePlanTakesTilesOnlyForTermsThatServeBothDirections) {
  model::AttentionPassFacts f;
  f.forms_scores = true;
  f.batch = 1, f.heads = 4, f.seq = 4096, f.head_dim = 32;
  f.tile_shape = f.right_padding_at_most = true;
  f.term = ops::RelativeTerm::properties();
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::tiles);
  f.term = ops::CopeTerm::properties();
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::explicit_scores);
  f.causal = true;
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::tiles);
  f.causal = false;
  f.term = ops::NoTerm::properties();
  f.softmax = false;  // stick-breaking
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::explicit_scores);
  f.softmax = true;
  f.right_padding_at_most = false;  // packed documents, a window, a left padding
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::explicit_scores);
}

// On CUDA the families that form their scores take tiles in fused evaluation where the CUDA kernel
// has their term (FoX, FIRE, DeBERTa's buckets, CoPE, relative tables), and keep their other paths
// otherwise (PaTH; a relative table under stick-breaking).
TEST(TileAttentionBidirectional, CudaTilesServeTheTermsTheCudaKernelHas) {
  model::AttentionPassFacts f;
  f.forms_scores = true;
  f.batch = 1, f.heads = 4, f.seq = 4096, f.head_dim = 64;
  f.cuda_tile_shape = f.right_padding_at_most = true;
  f.term = ops::FoxTerm::properties();
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::explicit_scores);  // auto
  f.kernel = config::AttentionKernel::fused;
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::tiles);
  f.causal = true;
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::tiles);
  f.term = ops::FireTerm::properties();
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::tiles);
  f.term = ops::BucketTerm::properties();
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::tiles);
  f.term = ops::CopeTerm::properties();
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::tiles);
  f.term = ops::RelativeTerm::properties();
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::tiles);
  f.softmax = false;
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::explicit_scores);
  f.softmax = true;
  f.term = ops::PathTerm::properties();
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::explicit_scores);
  // Stick-breaking: over a term the scan takes (here none), not over RoPE's remaps.
  f.softmax = false;
  f.term = ops::NoTerm::properties();
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::tiles);
  f.term->cuda_stick_breaking = false;
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::explicit_scores);
  f.softmax = true;
  f.kernel = config::AttentionKernel::auto_;
  f.term = ops::FireTerm::properties();  // positions only: SDPA takes it as a mask
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::bias_to_sdpa);
  f.kernel = config::AttentionKernel::fused;
  f.term = ops::FoxTerm::properties();
  f.training = true;
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::explicit_scores);
}

// A family with blocks of its own (PaTH) evaluates in them where no tiles run (a GPU: no CUDA tile
// form), and keeps its explicit scores under reference, in training, with a padding, or where its
// tiles run (the CPU).
TEST(TileAttentionBidirectional, AFamilyEvaluatesInItsOwnBlocksWhereNoTilesRun) {
  model::AttentionPassFacts f;
  f.forms_scores = f.family_blocks = f.causal = true;
  f.batch = 1, f.heads = 12, f.seq = 32768, f.head_dim = 64;
  f.term = ops::PathTerm::properties();
  f.cuda_tile_shape = f.right_padding_at_most = true;
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::family_blocks);
  f.kernel = config::AttentionKernel::fused;
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::family_blocks);
  f.kernel = config::AttentionKernel::reference;
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::explicit_scores);
  f.kernel = config::AttentionKernel::auto_;
  f.training = true;
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::explicit_scores);
  f.training = false;
  f.mask_beyond_causality = f.right_padding = true;
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::explicit_scores);
  f.mask_beyond_causality = f.right_padding = false;
  f.cuda_tile_shape = false, f.tile_shape = true;  // the CPU
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::tiles);
}

namespace {

// The hidden states of an MLM model in double over 150 tokens, the second sequence padded after
// `length` tokens, and which attention kernels ran.
torch::Tensor mlm_hidden_states(config::ModelConfig c, config::AttentionKernel kernel, int64_t length,
                                std::string* ran) {
  c.attention_kernel = kernel;
  auto [m, ids] = tiny_models::double_model(c, 150);
  m->eval();
  torch::NoGradGuard no_grad;
  model::AttentionKernelProbe probe;
  model::EncoderInput in;
  in.input_ids = ids;
  if (length < 150) {
    in.attention_mask = torch::ones({2, 150}, torch::kLong);
    in.attention_mask[1].narrow(0, length, 150 - length).zero_();
  }
  const torch::Tensor out = m->forward(in);
  *ran = probe.summary();
  return out;
}

}  // namespace

// Every MLM model whose term serves bidirectional attention evaluates through tile attention under
// auto, unpadded and right-padded, and gives the hidden states of model.attention_kernel
// reference (explicit scores; FIRE's term as SDPA's mask).
TEST(TileAttentionBidirectional, EveryFamilyEvaluatesThroughItAsOnTheExplicitScores) {
  for (const auto& [name, c] : tiny_models::bidirectional_tile_family_models())
    for (const int64_t length : {150, 97}) {
      SCOPED_TRACE(name + ", " + std::to_string(length) + " tokens");
      std::string tiled, reference;
      const torch::Tensor got = mlm_hidden_states(c, config::AttentionKernel::auto_, length, &tiled);
      const torch::Tensor want = mlm_hidden_states(c, config::AttentionKernel::reference, length, &reference);
      EXPECT_EQ(tiled, model::attention_kernel::kTile);
      EXPECT_EQ(reference.find(model::attention_kernel::kTile), std::string::npos) << reference;
      EXPECT_LE((got - want).abs().max().item<double>(), 1e-12);
    }
}

}  // namespace tile_attention_bidirectional_test
