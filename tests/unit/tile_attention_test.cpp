// Tile attention (ops/tile_attention) against the explicit math in double: softmax(q k^T scale +
// term + mask) v with the whole score matrix formed, for no term, FIRE's term as the fused FIRE
// bias (ops::fire_bias) computes it, CoPE's as the fused CoPE term (ops::cope_term) does and FoX's
// decay c_i - c_j, the RoPE remaps' two rotations, PaTH's Householder products (walked key by
// key from each query, with and without its forget gate), stick-breaking's weights and key lengths
// (a right padding), over
// lengths that end inside and on the edges of the query and key tiles; float against double at one
// thread and two; what it refuses; and FIRE, CoPE and FoX models evaluated through it against the same
// models on the explicit scores (model.attention_kernel reference).
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "roformer/model/attention_kernel.h"
#include "roformer/model/encoder.h"
#include "roformer/model/position/fire.h"
#include "roformer/model/stick_breaking.h"
#include "roformer/ops/common/cpu_vectors.h"
#include "roformer/ops/cope_term/cope_term.h"
#include "roformer/ops/fire_bias/fire_bias.h"
#include "roformer/ops/tile_attention/tile_attention.h"
#include "tiny_models.h"

namespace tile_attention_test {

using namespace roformer;
using ops::TileTerm;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// [B, H, S, D] views of [B, S, H, D] memory, as attention hands them over.
torch::Tensor heads_view(int64_t B, int64_t H, int64_t S, int64_t D, torch::Dtype dtype, double scale = 1.0) {
  return (torch::randn({B, S, H, D}, dtype) * scale).transpose(1, 2);
}

torch::Tensor future(int64_t S) {
  return torch::ones({S, S}, torch::kBool).triu(1);
}

// softmax(scores + term, hidden keys -inf) v, all in q's dtype.
torch::Tensor explicit_attention(const torch::Tensor& scores, const torch::Tensor& term, const torch::Tensor& v,
                                 bool causal) {
  torch::Tensor s = term.defined() ? scores + term : scores;
  if (causal) s = s.masked_fill(future(scores.size(-1)), -kInf);
  return torch::matmul(torch::softmax(s, -1), v);
}

double scale_of(const torch::Tensor& q) {
  return 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

torch::Tensor scores_of(const torch::Tensor& q, const torch::Tensor& k) {
  return torch::matmul(q, k.transpose(-2, -1)) * scale_of(q);
}

// FIRE's MLP with two flat units (kinks at +inf for the one that never switches) among rising and
// falling ones, kinks within the inputs' [0, 1]; and its term.
TileTerm fire_term(int64_t heads, double c, double L, torch::Dtype dtype) {
  model::FireMlp m = tiny_models::fire_mlp_with_flat_units(heads, dtype);
  {
    torch::NoGradGuard no_grad;
    m->out->weight.mul_(4.0);  // biases of a few units, so the term moves the weights
  }
  const model::FireMlpImpl::Piecewise f = m->piecewise(dtype);
  ops::FireTerm fire;
  fire.c = c;
  fire.threshold = L;
  fire.eps = model::FireImpl::kEps;
  fire.kinks = f.kinks.detach();
  fire.slope = f.slope.detach();
  fire.intercept = f.intercept.detach();
  return TileTerm{fire};
}

torch::Tensor fire_bias_of(const TileTerm& t, int64_t S) {
  const auto& f = std::get<ops::FireTerm>(t.added);
  return ops::fire_bias({torch::arange(S), 0, S, S, f.c, f.threshold, f.eps, f.kinks, f.slope, f.intercept})
      .unsqueeze(0);  // [1, H, S, S]
}

TileTerm cope_term_of(const torch::Tensor& at_integers) {
  return TileTerm{ops::CopeTerm{at_integers}};
}

TileTerm fox_term_of(const torch::Tensor& cumulative) {
  return TileTerm{ops::FoxTerm{cumulative}};
}

torch::Tensor cope_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& at_integers) {
  const torch::Tensor scores = scores_of(q, k).masked_fill(future(q.size(2)), -kInf);
  return explicit_attention(scores, ops::cope_term(scores, at_integers), v, true);
}

const std::vector<int64_t> kLengths{1, 5, 47, 48, 49, 131, 300};

}  // namespace

TEST(TileAttention, WithoutATermEqualsSoftmaxAttentionInDouble) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(1);
  for (const int64_t D : {8, 16})
    for (const int64_t S : kLengths)
      for (const bool causal : {false, true}) {
        const torch::Tensor q = heads_view(2, 3, S, D, torch::kFloat64, 2.0),
                            k = heads_view(2, 3, S, D, torch::kFloat64), v = heads_view(2, 3, S, D, torch::kFloat64);
        const torch::Tensor got = ops::tile_attention(q, k, v, scale_of(q), causal, {});
        const torch::Tensor want = explicit_attention(scores_of(q, k), {}, v, causal);
        EXPECT_LE((got - want).abs().max().item<double>(), 1e-12) << "S " << S << " D " << D << " causal " << causal;
        EXPECT_EQ(got.stride(1), D) << "the output is [B, S, H, D] in memory";
      }
}

// Key lengths (a right padding) hide each batch row's later keys from every query, as a padding
// mask does: no term (causal and bidirectional) and FoX's, lengths that end inside and on tiles.
TEST(TileAttention, KeyLengthsHideThePaddedKeysAsAPaddingMaskDoes) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(12);
  for (const int64_t S : {5, 131, 300})
    for (const bool causal : {false, true}) {
      const torch::Tensor q = heads_view(2, 3, S, 8, torch::kFloat64, 2.0), k = heads_view(2, 3, S, 8, torch::kFloat64),
                          v = heads_view(2, 3, S, 8, torch::kFloat64);
      const torch::Tensor lengths = torch::tensor({S, std::max<int64_t>(1, S - 130)}, torch::kLong);
      const torch::Tensor padded = (torch::arange(S).unsqueeze(0) >= lengths.unsqueeze(1)).view({2, 1, 1, S});
      const torch::Tensor mask = torch::zeros({2, 1, 1, S}, torch::kFloat64).masked_fill(padded, -kInf);
      const torch::Tensor c = torch::log_sigmoid(torch::randn({2, 3, S}, torch::kFloat64) + 2).cumsum(-1);
      const torch::Tensor decay = c.unsqueeze(-1) - c.unsqueeze(-2);
      const torch::Tensor got = ops::tile_attention(q, k, v, scale_of(q), causal, {}, {}, lengths);
      const torch::Tensor want = explicit_attention(scores_of(q, k), mask, v, causal);
      EXPECT_LE((got - want).abs().max().item<double>(), 1e-12) << "S " << S << " causal " << causal;
      if (!causal) continue;
      const torch::Tensor got_fox = ops::tile_attention(q, k, v, scale_of(q), true, fox_term_of(c), {}, lengths);
      const torch::Tensor want_fox = explicit_attention(scores_of(q, k), decay + mask, v, true);
      EXPECT_LE((got_fox - want_fox).abs().max().item<double>(), 1e-12) << "FoX, S " << S;
    }
}

TEST(TileAttention, FireTermEqualsTheFusedFireBiasInDouble) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(2);
  for (const int64_t S : kLengths)
    for (const auto& [c, L] : std::vector<std::pair<double, double>>{{0.1, 8.0}, {-0.3, 20.0}, {0.05, 1000.0}}) {
      const TileTerm t = fire_term(3, c, L, torch::kFloat64);
      const torch::Tensor q = heads_view(2, 3, S, 8, torch::kFloat64), k = heads_view(2, 3, S, 8, torch::kFloat64),
                          v = heads_view(2, 3, S, 8, torch::kFloat64);
      const torch::Tensor got = ops::tile_attention(q, k, v, scale_of(q), true, t);
      const torch::Tensor want = explicit_attention(scores_of(q, k), fire_bias_of(t, S), v, true);
      EXPECT_LE((got - want).abs().max().item<double>(), 1e-12) << "S " << S << " c " << c << " L " << L;
    }
}

TEST(TileAttention, FireTermIsNotTheNoTermAttention) {  // the comparison above sees the term
  torch::NoGradGuard no_grad;
  torch::manual_seed(2);
  const TileTerm t = fire_term(3, 0.1, 8.0, torch::kFloat64);
  const torch::Tensor q = heads_view(1, 3, 131, 8, torch::kFloat64), k = heads_view(1, 3, 131, 8, torch::kFloat64),
                      v = heads_view(1, 3, 131, 8, torch::kFloat64);
  EXPECT_GT((ops::tile_attention(q, k, v, 0.3, true, t) - ops::tile_attention(q, k, v, 0.3, true, {}))
                .abs()
                .max()
                .item<double>(),
            1e-2);
}

TEST(TileAttention, CopeTermEqualsTheFusedCopeTermInDouble) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(4);
  for (const int64_t S : kLengths)
    for (const int64_t P : {1, 5, 64}) {
      // Large queries: gates near 0 and 1 as well as between, so positions reach the clamp.
      const torch::Tensor q = heads_view(2, 3, S, 8, torch::kFloat64, 3.0), k = heads_view(2, 3, S, 8, torch::kFloat64),
                          v = heads_view(2, 3, S, 8, torch::kFloat64);
      const torch::Tensor at_integers = torch::randn({2, 3, S, P}, torch::kFloat64) * 2;
      const torch::Tensor got = ops::tile_attention(q, k, v, scale_of(q), true, cope_term_of(at_integers));
      const torch::Tensor want = cope_reference(q, k, v, at_integers);
      EXPECT_LE((got - want).abs().max().item<double>(), 1e-12) << "S " << S << " P " << P;
      if (S >= 47 && P == 64) {
        EXPECT_GT((got - ops::tile_attention(q, k, v, scale_of(q), true, {})).abs().max().item<double>(), 1e-2);
      }
    }
}

TEST(TileAttention, FoxTermEqualsTheForgetGatesDecayInDouble) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(6);
  for (const int64_t S : kLengths) {
    const torch::Tensor q = heads_view(2, 3, S, 8, torch::kFloat64), k = heads_view(2, 3, S, 8, torch::kFloat64),
                        v = heads_view(2, 3, S, 8, torch::kFloat64);
    const torch::Tensor c = torch::log_sigmoid(torch::randn({2, 3, S}, torch::kFloat64) + 2).cumsum(-1);
    const torch::Tensor decay = c.unsqueeze(-1) - c.unsqueeze(-2);  // c_i - c_j
    const torch::Tensor got = ops::tile_attention(q, k, v, scale_of(q), true, fox_term_of(c));
    EXPECT_LE((got - explicit_attention(scores_of(q, k), decay, v, true)).abs().max().item<double>(), 1e-12)
        << "S " << S;
    if (S >= 47) {
      EXPECT_GT((got - ops::tile_attention(q, k, v, scale_of(q), true, {})).abs().max().item<double>(), 1e-2);
    }
  }
}

// A relative table (Transformer-XL's form): scale x relative_q_i . table[h, i - j] on top of q.k,
// over lengths across the tiles' spans of distances.
TEST(TileAttention, RelativeTableEqualsTheGatheredProductsInDouble) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(10);
  for (const int64_t S : kLengths) {
    const torch::Tensor q = heads_view(2, 3, S, 8, torch::kFloat64), k = heads_view(2, 3, S, 8, torch::kFloat64),
                        v = heads_view(2, 3, S, 8, torch::kFloat64);
    ops::RelativeTerm r;
    r.q = heads_view(2, 3, S, 8, torch::kFloat64);
    r.table = torch::randn({3, S + 4, 8}, torch::kFloat64);  // rows past S unused
    const torch::Tensor distance = (torch::arange(S).unsqueeze(1) - torch::arange(S).unsqueeze(0)).clamp_min(0);
    const torch::Tensor rows = r.table.index_select(1, distance.reshape(-1)).view({3, S, S, 8});
    const torch::Tensor term = (r.q.unsqueeze(3) * rows.unsqueeze(0)).sum(-1) * scale_of(q);  // [B, H, S, S]
    const torch::Tensor got = ops::tile_attention(q, k, v, scale_of(q), true, TileTerm{r});
    EXPECT_LE((got - explicit_attention(scores_of(q, k), term, v, true)).abs().max().item<double>(), 1e-12)
        << "S " << S;
    // With a value table (Shaw's a^V): each output gains sum_j p_ij values[h, i - j].
    r.value_table = torch::randn({3, S, 8}, torch::kFloat64);
    const torch::Tensor probs =
        torch::softmax((scores_of(q, k) + term).masked_fill(future(S), -kInf), -1);  // [B, H, S, S]
    const torch::Tensor values = r.value_table.index_select(1, distance.reshape(-1)).view({3, S, S, 8});
    const torch::Tensor with_values = torch::matmul(probs, v) + (probs.unsqueeze(-1) * values.unsqueeze(0)).sum(3);
    EXPECT_LE((ops::tile_attention(q, k, v, scale_of(q), true, TileTerm{r}) - with_values).abs().max().item<double>(),
              1e-12)
        << "S " << S << " with values";
  }
}

// Bucketed tables (DeBERTa's form): scale x (by_query[i, query_bucket[i - j]] + by_key[key_bucket[i
// - j], j]), buckets that stop changing at a distance inside the tiles.
TEST(TileAttention, BucketsEqualTheGatheredTablesInDouble) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(11);
  for (const int64_t S : kLengths) {
    const torch::Tensor q = heads_view(2, 3, S, 8, torch::kFloat64), k = heads_view(2, 3, S, 8, torch::kFloat64),
                        v = heads_view(2, 3, S, 8, torch::kFloat64);
    ops::BucketTerm t;
    t.by_query = torch::randn({2, 3, S, 6}, torch::kFloat64);
    t.by_key = torch::randn({2, 3, 6, S}, torch::kFloat64);
    const torch::Tensor d = torch::arange(S);
    t.query_bucket = torch::div(d, 7, "floor").clamp_max(5);                        // constant from distance 35 on
    t.key_bucket = (5 - torch::div(d, 3, "floor")).clamp_min(0);                    // constant from 15 on
    const torch::Tensor distance = (d.unsqueeze(1) - d.unsqueeze(0)).clamp_min(0);  // [S, S]
    const torch::Tensor qb =
        t.query_bucket.index_select(0, distance.reshape(-1)).view({1, 1, S, S}).expand({2, 3, S, S});
    const torch::Tensor kb = t.key_bucket.index_select(0, distance.reshape(-1)).view({S, S});
    const torch::Tensor c2p = t.by_query.gather(3, qb);                                        // [b, h, i, qb[i, j]]
    const torch::Tensor p2c = t.by_key.gather(2, kb.view({1, 1, S, S}).expand({2, 3, S, S}));  // [b, h, kb[i, j], j]
    const torch::Tensor term = (c2p + p2c) * scale_of(q);
    const torch::Tensor got = ops::tile_attention(q, k, v, scale_of(q), true, TileTerm{t});
    EXPECT_LE((got - explicit_attention(scores_of(q, k), term, v, true)).abs().max().item<double>(), 1e-12)
        << "S " << S;
  }
}

// The RoPE remaps' two rotations: q.k near the query, far_q.far_k from the threshold on, with
// thresholds before the first key, between keys, inside and past the tiles, and past the length.
TEST(TileAttention, TwoRotationsEqualTheSelectedProductsInDouble) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(7);
  for (const int64_t S : kLengths)
    for (const double threshold : {0.0, 1.0, 5.0, 47.5, 130.0, 1e9}) {
      const torch::Tensor q = heads_view(2, 3, S, 8, torch::kFloat64), k = heads_view(2, 3, S, 8, torch::kFloat64),
                          v = heads_view(2, 3, S, 8, torch::kFloat64);
      TileTerm t;
      t.q = heads_view(2, 3, S, 8, torch::kFloat64);  // the family's own near rotation
      t.k = heads_view(2, 3, S, 8, torch::kFloat64);
      t.far_q = heads_view(2, 3, S, 8, torch::kFloat64, 2.0);
      t.far_k = heads_view(2, 3, S, 8, torch::kFloat64);
      t.far_threshold = threshold;
      t.score_factor = 1.3;
      const torch::Tensor distance = torch::arange(S).unsqueeze(1) - torch::arange(S).unsqueeze(0);
      const torch::Tensor scores =
          torch::where(distance >= threshold, scores_of(t.far_q, t.far_k), scores_of(t.q, t.k)) * 1.3;
      const torch::Tensor got = ops::tile_attention(q, k, v, scale_of(q), true, t);
      EXPECT_LE((got - explicit_attention(scores, {}, v, true)).abs().max().item<double>(), 1e-12)
          << "S " << S << " threshold " << threshold;
    }
}

// Dual Chunk Attention's three query rotations, picked per pair by the chunk gap, for chunks
// smaller and larger than the tiles.
TEST(TileAttention, ChunkGapsPickTheirProductsInDouble) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(12);
  for (const int64_t S : kLengths)
    for (const int64_t chunk : {1, 7, 60, 200}) {
      const torch::Tensor q = heads_view(2, 3, S, 8, torch::kFloat64), k = heads_view(2, 3, S, 8, torch::kFloat64),
                          v = heads_view(2, 3, S, 8, torch::kFloat64);
      TileTerm t;
      t.q = heads_view(2, 3, S, 8, torch::kFloat64);
      t.k = heads_view(2, 3, S, 8, torch::kFloat64);
      t.mid_q = heads_view(2, 3, S, 8, torch::kFloat64, 2.0);
      t.far_q = heads_view(2, 3, S, 8, torch::kFloat64, 3.0);
      t.far_k = heads_view(2, 3, S, 8, torch::kFloat64);
      t.chunk = chunk;
      const torch::Tensor in_chunk = torch::div(torch::arange(S), chunk, "floor");
      const torch::Tensor gap = in_chunk.unsqueeze(1) - in_chunk.unsqueeze(0);
      const torch::Tensor scores = torch::where(
          gap == 0, scores_of(t.q, t.k), torch::where(gap == 1, scores_of(t.mid_q, t.k), scores_of(t.far_q, t.far_k)));
      const torch::Tensor got = ops::tile_attention(q, k, v, scale_of(q), true, t);
      EXPECT_LE((got - explicit_attention(scores, {}, v, true)).abs().max().item<double>(), 1e-12)
          << "S " << S << " chunk " << chunk;
    }
}

namespace {

// PaTH (Yang et al. 2025, their Eq. for the scores): per query i a vector walked back from q_i,
// r <- (I - beta_j w_j w_j^T) r after scoring key j, so key j scores q_i . H_i ... H_{j+1} k_j;
// plus (c_i - c_j) with the gate; then times the scale. Scalar loops in double, causal.
torch::Tensor path_scores_by_walking(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& state,
                                     bool gate) {
  const int64_t B = q.size(0), H = q.size(1), S = q.size(2), D = q.size(3);
  const torch::Tensor qc = q.contiguous(), kc = k.contiguous(), st = state.contiguous();
  torch::Tensor out = torch::full({B, H, S, S}, -kInf, torch::kFloat64);
  auto Q = qc.accessor<double, 4>(), K = kc.accessor<double, 4>(), X = st.accessor<double, 4>();
  auto O = out.accessor<double, 4>();
  std::vector<double> r(D);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < S; ++i) {
        for (int64_t d = 0; d < D; ++d) r[d] = Q[b][h][i][d];
        for (int64_t j = i; j >= 0; --j) {
          double score = 0, along = 0;
          for (int64_t d = 0; d < D; ++d) score += r[d] * K[b][h][j][d];
          if (gate) score += X[b][h][i][D + 1] - X[b][h][j][D + 1];
          O[b][h][i][j] = score * scale_of(q);
          for (int64_t d = 0; d < D; ++d) along += X[b][h][j][d] * r[d];
          for (int64_t d = 0; d < D; ++d) r[d] -= X[b][h][j][D] * along * X[b][h][j][d];
        }
      }
  return out;
}

// PaTH's state as its layer forms it: unit w per head, beta in (0, 2), c the log gates' sums.
torch::Tensor path_state(int64_t B, int64_t H, int64_t S, int64_t D) {
  torch::Tensor w = torch::randn({B, H, S, D}, torch::kFloat64);
  w = w / w.norm(2, -1, true);
  const torch::Tensor beta = 2 * torch::sigmoid(torch::randn({B, H, S, 1}, torch::kFloat64) * 2);
  const torch::Tensor c = torch::log_sigmoid(torch::randn({B, H, S}, torch::kFloat64) + 2).cumsum(-1).unsqueeze(-1);
  return torch::cat({w, beta, c}, -1);
}

}  // namespace

TEST(TileAttention, PathScoresEqualTheHouseholderWalkInDouble) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(13);
  for (const int64_t S : kLengths)
    for (const bool gate : {false, true}) {
      const torch::Tensor q = heads_view(2, 3, S, 8, torch::kFloat64, 2.0), k = heads_view(2, 3, S, 8, torch::kFloat64),
                          v = heads_view(2, 3, S, 8, torch::kFloat64);
      const TileTerm t{ops::PathTerm{path_state(2, 3, S, 8), gate}};
      const torch::Tensor& state = std::get<ops::PathTerm>(t.added).state;
      const torch::Tensor want = torch::matmul(torch::softmax(path_scores_by_walking(q, k, state, gate), -1), v);
      EXPECT_LE((ops::tile_attention(q, k, v, scale_of(q), true, t) - want).abs().max().item<double>(), 1e-12)
          << "S " << S << " gate " << gate;
      if (S > 1) {  // the walk moves the result: the comparison sees it
        EXPECT_GT((explicit_attention(scores_of(q, k), {}, v, true) - want).abs().max().item<double>(), 1e-3);
      }
    }
}

// Stick-breaking (model::stick_breaking_weights, the authors' log-space form) with its remainder
// dropped or on the query's own value, alone and over FoX's decay.
TEST(TileAttention, StickBreakingEqualsTheLogSpaceWeightsInDouble) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(8);
  for (const int64_t S : kLengths)
    for (const bool fox : {false, true}) {
      const torch::Tensor q = heads_view(2, 3, S, 8, torch::kFloat64, 2.0), k = heads_view(2, 3, S, 8, torch::kFloat64),
                          v = heads_view(2, 3, S, 8, torch::kFloat64);
      const torch::Tensor c = torch::log_sigmoid(torch::randn({2, 3, S}, torch::kFloat64) + 2).cumsum(-1);
      torch::Tensor scores = scores_of(q, k);
      if (fox) scores = scores + (c.unsqueeze(-1) - c.unsqueeze(-2));
      const model::StickBreaking sb = model::stick_breaking_weights(scores.masked_fill(future(S), -kInf), 0);
      const torch::Tensor dropped = torch::matmul(sb.weights, v);
      const torch::Tensor kept = dropped + sb.remainder.unsqueeze(-1) * v;
      const TileTerm term = fox ? fox_term_of(c) : TileTerm{};
      const double scale = scale_of(q);
      EXPECT_LE((ops::tile_attention(q, k, v, scale, true, term, ops::TileNormalizer::stick_breaking) - dropped)
                    .abs()
                    .max()
                    .item<double>(),
                1e-12)
          << "S " << S << " fox " << fox;
      EXPECT_LE(
          (ops::tile_attention(q, k, v, scale, true, term, ops::TileNormalizer::stick_breaking_remainder_to_query) -
           kept)
              .abs()
              .max()
              .item<double>(),
          1e-12)
          << "S " << S << " fox " << fox;
    }
}

TEST(TileAttention, FloatFollowsDoubleAtAnyThreadCount) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(5);
  const int64_t S = 301;
  const torch::Tensor q = heads_view(2, 4, S, 32, torch::kFloat64), k = heads_view(2, 4, S, 32, torch::kFloat64),
                      v = heads_view(2, 4, S, 32, torch::kFloat64);
  const torch::Tensor at_integers = torch::randn({2, 4, S, 16}, torch::kFloat64);
  const torch::Tensor state = path_state(2, 4, S, 32);
  const std::vector<std::pair<const char*, std::function<TileTerm(torch::Dtype)>>> terms{
      {"none", [](torch::Dtype) { return TileTerm{}; }},
      {"fire", [](torch::Dtype dt) { return fire_term(4, 0.1, 16.0, dt); }},
      {"cope", [&](torch::Dtype dt) { return cope_term_of(at_integers.to(dt)); }},
      {"fox", [&](torch::Dtype dt) { return fox_term_of(at_integers.select(-1, 0).cumsum(-1).to(dt)); }},
      {"path",
       [&](torch::Dtype dt) {
         return TileTerm{ops::PathTerm{state.to(dt), true}};
       }},
  };
  const int threads = at::get_num_threads();
  for (const auto& [name, term] : terms) {
    const torch::Tensor want = ops::tile_attention(q, k, v, 0.2, true, term(torch::kFloat64));
    auto in_float = [&](int n) {
      at::set_num_threads(n);
      return ops::tile_attention(q.to(torch::kFloat32), k.to(torch::kFloat32), v.to(torch::kFloat32), 0.2, true,
                                 term(torch::kFloat32));
    };
    const torch::Tensor one = in_float(1), two = in_float(2);
    at::set_num_threads(threads);
    EXPECT_LE((one.to(torch::kFloat64) - want).abs().max().item<double>(), 1e-5) << name;
    EXPECT_TRUE(torch::equal(one, two)) << name << ": the thread count changed the bits";
  }
  const auto sticks = ops::TileNormalizer::stick_breaking_remainder_to_query;
  const torch::Tensor want = ops::tile_attention(q, k, v, 0.2, true, {}, sticks);
  const torch::Tensor got =
      ops::tile_attention(q.to(torch::kFloat32), k.to(torch::kFloat32), v.to(torch::kFloat32), 0.2, true, {}, sticks);
  EXPECT_LE((got.to(torch::kFloat64) - want).abs().max().item<double>(), 1e-5) << "stick-breaking";
}

// The term's tensors in dtype dt.
TileTerm to_dtype(TileTerm t, torch::Dtype dt) {
  std::visit(
      [&](auto& form) {
        using F = std::decay_t<decltype(form)>;
        if constexpr (std::is_same_v<F, ops::RelativeTerm>) {
          form.q = form.q.to(dt), form.table = form.table.to(dt), form.value_table = form.value_table.to(dt);
        } else if constexpr (std::is_same_v<F, ops::CopeTerm>) {
          form.at_integers = form.at_integers.to(dt);
        } else if constexpr (std::is_same_v<F, ops::PathTerm>) {
          form.state = form.state.to(dt);
        }
      },
      t.added);
  return t;
}

// The kernels' 32-byte and (AVX-512) 64-byte vector forms give the same attention in double, for
// every term form and both directions. Skipped where this build or CPU has no 64-byte forms (the
// tests above then run the 32-byte ones; here, on AVX-512, they run the 64-byte ones).
TEST(TileAttention, ThirtyTwoAndSixtyFourByteVectorsAgree) {
  EXPECT_THROW(ops::set_cpu_vector_bytes_for_testing(48), std::exception);
  if (!ops::wide_cpu_vectors_available()) GTEST_SKIP() << "no 64-byte CPU kernels in this build or on this CPU";
  torch::NoGradGuard no_grad;
  torch::manual_seed(13);
  const int64_t S = 300, D = 24;  // D: 64-byte panels, then a 32-byte one
  const torch::Tensor q = heads_view(2, 3, S, D, torch::kFloat64), k = heads_view(2, 3, S, D, torch::kFloat64),
                      v = heads_view(2, 3, S, D, torch::kFloat64);
  ops::RelativeTerm relative{heads_view(2, 3, S, D, torch::kFloat64), torch::randn({3, 2 * S - 1, D}, torch::kFloat64),
                             torch::randn({3, 2 * S - 1, D}, torch::kFloat64), S - 1};
  const std::vector<std::tuple<const char*, TileTerm, bool>> cases{
      {"none, causal", TileTerm{}, true},
      {"none, bidirectional", TileTerm{}, false},
      {"relative with values, bidirectional", TileTerm{relative}, false},
      {"fire, causal", fire_term(3, 0.1, 8.0, torch::kFloat64), true},
      {"cope", cope_term_of(torch::randn({2, 3, S, 16}, torch::kFloat64)), true},
      {"path", TileTerm{ops::PathTerm{path_state(2, 3, S, D), true}}, true},
  };
  const torch::Tensor lengths = torch::tensor({S, int64_t{170}}, torch::kLong);
  for (const auto& [name, term, causal] : cases) {
    const torch::Tensor keys = std::holds_alternative<ops::PathTerm>(term.added) ? torch::Tensor() : lengths;
    auto run = [&](int bytes, torch::Dtype dt) {
      ops::set_cpu_vector_bytes_for_testing(bytes);
      torch::Tensor out = ops::tile_attention(q.to(dt), k.to(dt), v.to(dt), scale_of(q), causal, to_dtype(term, dt),
                                              ops::TileNormalizer::softmax, keys);
      ops::set_cpu_vector_bytes_for_testing(0);
      return out.to(torch::kFloat64);
    };
    const torch::Tensor want = run(32, torch::kFloat64);
    EXPECT_LE((run(64, torch::kFloat64) - want).abs().max().item<double>(), 1e-12) << name;
    // In float a 64-byte vector holds 16 lanes: D = 24 ends each product with a 32-byte panel.
    EXPECT_LE((run(64, torch::kFloat32) - want).abs().max().item<double>(), 1e-4) << name << ", float";
  }
}

TEST(TileAttention, RefusesWhatItCannotTake) {
  const torch::Tensor q = torch::randn({1, 2, 9, 12}), odd_dim = q;
  EXPECT_FALSE(ops::tile_attention_supports(odd_dim, odd_dim, odd_dim));
  EXPECT_THROW(ops::tile_attention(odd_dim, odd_dim, odd_dim, 1.0, true, {}), c10::Error);
  const torch::Tensor x = torch::randn({1, 2, 9, 8});
  EXPECT_FALSE(ops::tile_attention_supports(x.to(torch::kBFloat16), x.to(torch::kBFloat16), x.to(torch::kBFloat16)));
  EXPECT_FALSE(ops::tile_attention_supports(x, x.to(torch::kFloat64), x));
  EXPECT_THROW(ops::tile_attention(x, x, x, 1.0, false, fire_term(2, 0.1, 8.0, torch::kFloat32)), c10::Error);
  EXPECT_THROW(ops::tile_attention(x, x, x, 1.0, true, fire_term(3, 0.1, 8.0, torch::kFloat32)), c10::Error);
  EXPECT_THROW(ops::tile_attention(x, x, x, 1.0, true, cope_term_of(torch::zeros({1, 2, 8, 4}))), c10::Error);
  EXPECT_THROW(ops::tile_attention(x, x, x, 1.0, true, fox_term_of(torch::zeros({1, 2, 10}))), c10::Error);
  TileTerm bidirectional_far;
  bidirectional_far.far_q = x;
  bidirectional_far.far_k = x;
  bidirectional_far.far_threshold = 2;
  EXPECT_THROW(ops::tile_attention(x, x, x, 1.0, false, bidirectional_far), c10::Error);
  TileTerm path{ops::PathTerm{torch::zeros({1, 2, 9, x.size(3) + 1})}};  // state: D + 2 features per token
  EXPECT_THROW(ops::tile_attention(x, x, x, 1.0, true, path), c10::Error);
  path.added = ops::PathTerm{torch::zeros({1, 2, 9, x.size(3) + 2})};  // and the walk is causal
  EXPECT_NO_THROW(ops::tile_attention(x, x, x, 1.0, true, path));
  EXPECT_THROW(ops::tile_attention(x, x, x, 1.0, false, path), c10::Error);
  const torch::Tensor lengths = torch::tensor({int64_t{4}}, torch::kLong);  // PaTH's walk passes every position
  EXPECT_THROW(ops::tile_attention(x, x, x, 1.0, true, path, ops::TileNormalizer::softmax, lengths), c10::Error);
  for (const int64_t bad : {0, 10})  // outside [1, S]
    EXPECT_THROW(
        ops::tile_attention(x, x, x, 1.0, true, {}, ops::TileNormalizer::softmax, torch::tensor({bad}, torch::kLong)),
        c10::Error);
  EXPECT_THROW(
      ops::tile_attention(x, x, x, 1.0, true, {}, ops::TileNormalizer::softmax, torch::ones({2}, torch::kLong)),
      c10::Error);
  const torch::Tensor leaf = x.clone().requires_grad_();
  EXPECT_THROW(ops::tile_attention(leaf, x, x, 1.0, true, {}), c10::Error);
}

namespace {

// The hidden states of a model in double over `tokens` tokens (CoPE's tables drawn, not its
// zeros), and which attention kernels ran.
torch::Tensor hidden_states(config::ModelConfig c, config::AttentionKernel kernel, bool train, std::string* ran,
                            int64_t tokens) {
  c.attention_kernel = kernel;
  auto [m, ids] = tiny_models::double_model(c, tokens);
  train ? m->train() : m->eval();
  torch::NoGradGuard no_grad;
  model::AttentionKernelProbe probe;
  model::EncoderInput in;
  in.input_ids = ids;
  const torch::Tensor out = m->forward(in);
  *ran = probe.summary();
  return out;
}

// 150 tokens, except CoPE's 520: up to 512 the short-sequence kernel computes its term
// (short_attention_cope_test.cpp).
void expect_tiles_in_evaluation_only(const config::ModelConfig& c) {
  std::string tiled, reference, training;
  const int64_t tokens = c.position.kind == config::PositionKind::cope ? 520 : 150;
  const torch::Tensor got = hidden_states(c, config::AttentionKernel::auto_, false, &tiled, tokens);
  const torch::Tensor want = hidden_states(c, config::AttentionKernel::reference, false, &reference, tokens);
  EXPECT_EQ(tiled, model::attention_kernel::kTile);
  EXPECT_EQ(reference.find(model::attention_kernel::kTile), std::string::npos) << reference;
  EXPECT_LE((got - want).abs().max().item<double>(), 1e-12);
  hidden_states(c, config::AttentionKernel::auto_, true, &training, tokens);
  // Causal FoX folds its decay into the keys in training (the short kernel at this length); a
  // term with a backward in tiles (stick-breaking's scores alone too, PaTH's blocks) trains in them.
  const bool softmax = c.attention_normalizer == config::AttentionNormalizer::softmax;
  const bool folded = c.position.kind == config::PositionKind::fox && softmax;
  const bool sticks_alone =
      !softmax && c.position.rope.mode == config::RopeMode::rotate &&
      (c.position.kind == config::PositionKind::rope || c.position.kind == config::PositionKind::none);
  const bool tile_backward =
      c.position.kind == config::PositionKind::transformer_xl || c.position.kind == config::PositionKind::shaw ||
      c.position.kind == config::PositionKind::deberta || c.position.kind == config::PositionKind::fire ||
      (c.position.kind == config::PositionKind::cope && softmax) || sticks_alone ||
      (c.position.kind == config::PositionKind::path && c.attention_normalizer == config::AttentionNormalizer::softmax);
  EXPECT_EQ(training, folded          ? model::attention_kernel::kShort
                      : tile_backward ? model::attention_kernel::kTile
                                      : model::attention_kernel::kExplicitScores);
}

}  // namespace

// Every model tile attention takes (tiny_models::tile_family_models: the families with a tile
// term, PaTH-FoX, stick-breaking over RoPE and NoPE, the RoPE remaps) evaluated without autograd
// runs tile attention and gives the hidden states of model.attention_kernel reference (explicit
// scores; FIRE's term as SDPA's mask); in training at this size they keep the explicit scores
// (causal FoX: its decay folded into the keys), but for the terms with a backward in tiles.
TEST(TileAttention, EveryTileFamilyEvaluatesThroughItAsOnTheExplicitScores) {
  for (const auto& [name, c] : tiny_models::tile_family_models()) {
    SCOPED_TRACE(name);
    expect_tiles_in_evaluation_only(c);
  }
}

}  // namespace tile_attention_test
