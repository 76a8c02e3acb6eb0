// The backward of tile attention (ops::tile_attention_trainable) against autograd through the
// explicit math in double: softmax(q k^T scale + term + mask) v with the whole score matrix
// formed, its values and the gradients of every input (q, k, v, the term's queries and tables,
// and the parameters the tables come from), causal and bidirectional, with and without a right
// padding, over lengths that end inside and on the edges of the query and key tiles; Shaw's
// clipped tables shared by the heads; float against double; the same bits at one thread and two;
// and what it refuses.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "roformer/ops/cope_term/cope_term.h"
#include "roformer/ops/tile_attention/tile_attention.h"

namespace tile_attention_grad_test {

using namespace roformer;
using ops::TileTerm;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr ops::TileNormalizer kSoftmax = ops::TileNormalizer::softmax;
const std::vector<int64_t> kLengths{1, 47, 48, 49, 131, 300};

// [B, H, S, D] views of [B, S, H, D] memory, as attention hands them over.
torch::Tensor heads(int64_t B, int64_t H, int64_t S, int64_t D, double scale = 1.0) {
  return (torch::randn({B, S, H, D}, torch::kFloat64) * scale).transpose(1, 2);
}

// i - j for every pair, [S, S].
torch::Tensor query_minus_key(int64_t S) {
  return torch::arange(S).unsqueeze(1) - torch::arange(S).unsqueeze(0);
}

// Right padding of a batch of two: the first row keeps every key, the second about two thirds.
torch::Tensor key_lengths(int64_t S) {
  return torch::tensor({S, std::max<int64_t>(1, 2 * S / 3)}, torch::kLong);
}

// softmax(scores, hidden keys -inf) as probabilities [B, H, S, S]: the causal mask and the
// right padding's hidden keys.
torch::Tensor probabilities(torch::Tensor scores, bool causal, const torch::Tensor& lengths) {
  const int64_t S = scores.size(-1);
  if (causal) scores = scores.masked_fill(query_minus_key(S) < 0, -kInf);
  if (lengths.defined()) {
    const torch::Tensor hidden = torch::arange(S).view({1, 1, 1, S}) >= lengths.view({-1, 1, 1, 1});
    scores = scores.masked_fill(hidden, -kInf);
  }
  return torch::softmax(scores, -1);
}

// Leaves in double that take a gradient, each a fresh copy of `t`.
torch::Tensor leaf(const torch::Tensor& t) {
  return t.detach().clone().requires_grad_(true);
}

// The tile op's output and every leaf's gradient against the explicit math's, both of
// sum(out * weights) for fixed random weights.
void expect_same_gradients(const std::vector<torch::Tensor>& leaves, const std::function<torch::Tensor()>& tiles,
                           const std::function<torch::Tensor()>& reference, const std::string& what,
                           double tolerance = 1e-10) {
  const torch::Tensor got = tiles(), want = reference();
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_LE((got - want).abs().max().item<double>(), 1e-12) << what << ": output";
  const torch::Tensor weights = torch::randn(want.sizes(), want.options());
  const auto got_grads = torch::autograd::grad({(got * weights).sum()}, leaves, {}, false, false, true);
  const auto want_grads = torch::autograd::grad({(want * weights).sum()}, leaves, {}, false, false, true);
  for (size_t i = 0; i < leaves.size(); ++i) {
    ASSERT_TRUE(want_grads[i].defined()) << what << ": leaf " << i << " takes no gradient in the reference";
    ASSERT_TRUE(got_grads[i].defined()) << what << ": leaf " << i << " got no gradient from the tiles";
    const double scale = std::max(1.0, want_grads[i].abs().max().item<double>());
    EXPECT_LE((got_grads[i] - want_grads[i]).abs().max().item<double>(), tolerance * scale)
        << what << ": gradient of leaf " << i;
  }
}

// A relative term's explicit scores and value part for query rows and keys, [B, H, S, S] and
// the value rows gathered per pair [H, S, S, D]: the term scale x q_r . table[origin + i - j].
struct RelativeParts {
  torch::Tensor term, values;
};
RelativeParts relative_parts(const ops::RelativeTerm& r, double scale) {
  const int64_t H = r.q.size(1), S = r.q.size(2), D = r.q.size(3);
  // Distances below -origin (keys after the query in causal attention) read row 0: they are masked.
  const torch::Tensor index = (query_minus_key(S) + r.origin).clamp_min(0).reshape(-1);
  const torch::Tensor rows = r.table.index_select(1, index).view({H, S, S, D});
  RelativeParts parts{(r.q.unsqueeze(3) * rows.unsqueeze(0)).sum(-1) * scale, torch::Tensor()};
  if (r.value_table.defined()) parts.values = r.value_table.index_select(1, index).view({H, S, S, D});
  return parts;
}

torch::Tensor relative_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                 const ops::RelativeTerm& r, double scale, bool causal, const torch::Tensor& lengths) {
  const RelativeParts parts = relative_parts(r, scale);
  const torch::Tensor probs =
      probabilities(torch::matmul(q, k.transpose(-2, -1)) * scale + parts.term, causal, lengths);
  torch::Tensor out = torch::matmul(probs, v);
  if (parts.values.defined()) out = out + (probs.unsqueeze(-1) * parts.values.unsqueeze(0)).sum(3);
  return out;
}

// Stick-breaking's weights from their definition in log space (Tan et al. 2025): for keys j < i,
// log w_ij = logsigmoid(z_ij) + sum_{j<t<i} logsigmoid(-z_it); hidden keys (j >= i, or past a
// row's length) weigh nothing and break no stick. With `to_query`, what the sticks leave weighs the
// query's own value.
torch::Tensor stick_breaking_reference(const torch::Tensor& scores, const torch::Tensor& v,
                                       const torch::Tensor& lengths, bool to_query) {
  const int64_t S = scores.size(-1);
  torch::Tensor hidden = (query_minus_key(S) <= 0).view({1, 1, S, S});
  if (lengths.defined()) hidden = hidden | (torch::arange(S).view({1, 1, 1, S}) >= lengths.view({-1, 1, 1, 1}));
  const torch::Tensor off = torch::where(hidden, torch::zeros_like(scores), torch::log_sigmoid(-scores));
  const torch::Tensor after = off.flip(-1).cumsum(-1).flip(-1) - off;  // sum over t > j of the row's
  const torch::Tensor weights =
      torch::where(hidden, torch::zeros_like(scores), torch::exp(torch::log_sigmoid(scores) + after));
  torch::Tensor out = torch::matmul(weights, v);
  if (to_query) out = out + (1 - weights.sum(-1, true)) * v;
  return out;
}

}  // namespace

TEST(TileAttentionGrad, WithoutATermEqualsAutogradThroughTheExplicitScoresInDouble) {
  torch::manual_seed(41);
  for (const int64_t S : kLengths)
    for (const bool causal : {true, false})
      for (const bool padded : {false, true}) {
        const torch::Tensor q = leaf(heads(2, 3, S, 16, 2.0)), k = leaf(heads(2, 3, S, 16)),
                            v = leaf(heads(2, 3, S, 16));
        const torch::Tensor lengths = padded ? key_lengths(S) : torch::Tensor();
        const double scale = 0.25;
        expect_same_gradients(
            {q, k, v},
            [&] { return ops::tile_attention_trainable(q, k, v, scale, causal, TileTerm{}, kSoftmax, lengths); },
            [&] {
              return torch::matmul(probabilities(torch::matmul(q, k.transpose(-2, -1)) * scale, causal, lengths), v);
            },
            "S " + std::to_string(S) + (causal ? " causal" : " bidirectional") + (padded ? " padded" : ""));
      }
}

// Transformer-XL's form: content queries q + u replace attention's, position queries q + v meet a
// table of every distance, and Shaw's value table; the gradients reach q, u, v and the tables.
TEST(TileAttentionGrad, RelativeTablesEqualAutogradThroughTheGatheredProductsInDouble) {
  torch::manual_seed(42);
  for (const int64_t S : kLengths)
    for (const bool causal : {true, false})
      for (const bool padded : {false, true}) {
        const int64_t H = 3, D = 8, origin = causal ? 0 : S - 1;
        const torch::Tensor q = leaf(heads(2, H, S, D)), k = leaf(heads(2, H, S, D)), v = leaf(heads(2, H, S, D));
        const torch::Tensor u = leaf(torch::randn({1, H, 1, D}, torch::kFloat64)),
                            w = leaf(torch::randn({1, H, 1, D}, torch::kFloat64));
        const torch::Tensor table = leaf(torch::randn({H, origin + S + 3, D}, torch::kFloat64)),  // rows past unused
            values = leaf(torch::randn({H, origin + S, D}, torch::kFloat64) * 0.5);
        const torch::Tensor lengths = padded ? key_lengths(S) : torch::Tensor();
        const double scale = 1.0 / std::sqrt(double(D));
        auto term = [&] {
          ops::RelativeTerm r{q + w, table, values, origin};
          TileTerm t{r};
          t.q = q + u;
          return t;
        };
        expect_same_gradients(
            {q, k, v, u, w, table, values},
            [&] { return ops::tile_attention_trainable(q, k, v, scale, causal, term(), kSoftmax, lengths); },
            [&] {
              const TileTerm t = term();
              return relative_reference(t.q, k, v, std::get<ops::RelativeTerm>(t.added), scale, causal, lengths);
            },
            "S " + std::to_string(S) + (causal ? " causal" : " bidirectional") + (padded ? " padded" : ""));
      }
}

// Shaw's clipped tables, shared by the heads (an expanded view of one table per side): tiles wholly
// past the clip take one product per row, in backward too; the gradients reach the base tables.
TEST(TileAttentionGrad, ClippedSharedTablesEqualAutogradOnBothSides) {
  torch::manual_seed(43);
  for (const int64_t S : {5, 131, 300})
    for (const int64_t clip : {1, 4, 60})
      for (const bool causal : {true, false}) {
        const int64_t H = 3, D = 8, origin = causal ? 0 : S - 1;
        const torch::Tensor q = leaf(heads(2, H, S, D)), k = leaf(heads(2, H, S, D)), v = leaf(heads(2, H, S, D));
        const torch::Tensor key_base = leaf(torch::randn({2 * clip + 1, D}, torch::kFloat64)),
                            value_base = leaf(torch::randn({2 * clip + 1, D}, torch::kFloat64));
        const torch::Tensor row = clip - torch::arange(-origin, S).clamp(-clip, clip);  // Shaw's row of i - j
        auto term = [&] {
          return ops::RelativeTerm{q, key_base.index_select(0, row).unsqueeze(0).expand({H, origin + S, D}),
                                   value_base.index_select(0, row).unsqueeze(0).expand({H, origin + S, D}), origin};
        };
        const double scale = 1.0 / std::sqrt(double(D));
        expect_same_gradients(
            {q, k, v, key_base, value_base},
            [&] { return ops::tile_attention_trainable(q, k, v, scale, causal, TileTerm{term()}); },
            [&] { return relative_reference(q, k, v, term(), scale, causal, {}); },
            "S " + std::to_string(S) + " clip " + std::to_string(clip) + (causal ? " causal" : " bidirectional"));
      }
}

// DeBERTa's form: bucket indices that stop changing on both sides, by_query [B, H, S, R] and by_key
// [B, H, R, S] gathered per pair; the gradients reach both tables.
TEST(TileAttentionGrad, BucketsEqualAutogradThroughTheGatheredTablesInDouble) {
  torch::manual_seed(46);
  for (const int64_t S : kLengths)
    for (const bool causal : {true, false})
      for (const bool padded : {false, true}) {
        const int64_t B = 2, H = 3, D = 8, R = 12, origin = causal ? 0 : S - 1;
        const torch::Tensor q = leaf(heads(B, H, S, D)), k = leaf(heads(B, H, S, D)), v = leaf(heads(B, H, S, D));
        const torch::Tensor by_query = leaf(torch::randn({B, H, S, R}, torch::kFloat64)),
                            by_key = leaf(torch::randn({B, H, R, S}, torch::kFloat64));
        // Buckets of d in [-origin, S): exact within 3 of the query, then one per side.
        const torch::Tensor d = torch::arange(-origin, S);
        const torch::Tensor query_bucket = d.clamp(-4, 4) + 5, key_bucket = (-d).clamp(-4, 4) + 5;
        const torch::Tensor lengths = padded ? key_lengths(S) : torch::Tensor();
        const double scale = 0.3;
        const ops::BucketTerm term{by_query, by_key, query_bucket, key_bucket, origin};
        const torch::Tensor pairs = (query_minus_key(S) + origin).clamp_min(0);  // causal's hidden pairs: row 0
        auto reference = [&] {
          const torch::Tensor qb =
              query_bucket.index_select(0, pairs.reshape(-1)).view({1, 1, S, S}).expand({B, H, S, S});
          const torch::Tensor kb = key_bucket.index_select(0, pairs.reshape(-1)).view({S, S});
          // by_key[b, h, kb[i - j], j]: gather along the bucket axis with key j's column.
          const torch::Tensor key_part = by_key.gather(2, kb.view({1, 1, S, S}).expand({B, H, S, S}));
          const torch::Tensor term_scores = (by_query.gather(3, qb) + key_part) * scale;
          const torch::Tensor probs =
              probabilities(torch::matmul(q, k.transpose(-2, -1)) * scale + term_scores, causal, lengths);
          return torch::matmul(probs, v);
        };
        expect_same_gradients(
            {q, k, v, by_query, by_key},
            [&] { return ops::tile_attention_trainable(q, k, v, scale, causal, TileTerm{term}, kSoftmax, lengths); },
            reference, "S " + std::to_string(S) + (causal ? " causal" : " bidirectional") + (padded ? " padded" : ""));
      }
}

// Stick-breaking (both remainders) over q . k alone and over a relative table: each row's weights
// and their gradients in one scan from the query back, against autograd through the log-space
// definition.
TEST(TileAttentionGrad, StickBreakingEqualsAutogradThroughItsLogSpaceDefinitionInDouble) {
  torch::manual_seed(47);
  for (const int64_t S : kLengths)
    for (const bool to_query : {false, true})
      for (const bool padded : {false, true})
        for (const bool relative : {false, true}) {
          const int64_t H = 3, D = 8;
          const torch::Tensor q = leaf(heads(2, H, S, D, 2.0)), k = leaf(heads(2, H, S, D)),
                              v = leaf(heads(2, H, S, D));
          const torch::Tensor table = leaf(torch::randn({H, S, D}, torch::kFloat64));
          const torch::Tensor lengths = padded ? key_lengths(S) : torch::Tensor();
          const double scale = 1.0 / std::sqrt(double(D));
          const ops::TileNormalizer normalizer =
              to_query ? ops::TileNormalizer::stick_breaking_remainder_to_query : ops::TileNormalizer::stick_breaking;
          auto term = [&] { return relative ? TileTerm{ops::RelativeTerm{q, table, {}, 0}} : TileTerm{}; };
          std::vector<torch::Tensor> leaves{q, k, v};
          if (relative) leaves.push_back(table);
          expect_same_gradients(
              leaves, [&] { return ops::tile_attention_trainable(q, k, v, scale, true, term(), normalizer, lengths); },
              [&] {
                torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) * scale;
                if (relative) scores = scores + relative_parts(ops::RelativeTerm{q, table, {}, 0}, scale).term;
                return stick_breaking_reference(scores, v, lengths, to_query);
              },
              "S " + std::to_string(S) + (to_query ? " to the query" : " discarded") + (padded ? " padded" : "") +
                  (relative ? " relative" : ""));
        }
}

// FIRE's piecewise-linear map of x = psi(i - j) / (psi(max(i, L)) + eps), psi(d) = log(|c d| + 1),
// with the future side's second map for keys after the query (bidirectional): the gradients reach
// the slopes and intercepts of both sides, c and L (a threshold inside the lengths, so the
// queries at or below it read L and one ties it).
TEST(TileAttentionGrad, FireEqualsAutogradThroughItsPiecewiseMapInDouble) {
  torch::manual_seed(48);
  for (const int64_t S : kLengths)
    for (const bool causal : {true, false})
      for (const bool padded : {false, true}) {
        const int64_t B = 2, H = 3, D = 8, W = 5;
        const torch::Tensor q = leaf(heads(B, H, S, D)), k = leaf(heads(B, H, S, D)), v = leaf(heads(B, H, S, D));
        const torch::Tensor kinks = torch::tensor({0.1, 0.3, 0.45, 0.7, 0.9}, torch::kFloat64),
                            future_kinks = torch::tensor({0.2, 0.5, 0.8}, torch::kFloat64);
        const torch::Tensor slope = leaf(torch::randn({H, W + 1}, torch::kFloat64)),
                            intercept = leaf(torch::randn({H, W + 1}, torch::kFloat64)),
                            future_slope = leaf(torch::randn({H, 4}, torch::kFloat64)),
                            future_intercept = leaf(torch::randn({H, 4}, torch::kFloat64));
        const torch::Tensor c = leaf(torch::tensor(0.3, torch::kFloat64)),
                            L = leaf(torch::tensor(static_cast<double>(std::max<int64_t>(1, S / 3)), torch::kFloat64));
        const torch::Tensor lengths = padded ? key_lengths(S) : torch::Tensor();
        const double scale = 0.35, eps = 1e-6;
        auto term = [&] {
          ops::FireTerm t;
          t.c = c.item<double>();
          t.threshold = L.item<double>();
          t.eps = eps;
          t.kinks = kinks;
          t.slope = slope;
          t.intercept = intercept;
          if (!causal) {
            t.future_kinks = future_kinks;
            t.future_slope = future_slope;
            t.future_intercept = future_intercept;
          }
          t.c_tensor = c;
          t.threshold_tensor = L;
          return TileTerm{t};
        };
        auto reference = [&] {
          const torch::Tensor pos = torch::arange(S, torch::kFloat64);
          auto psi = [&](const torch::Tensor& x) { return torch::log1p((c * x).abs()); };
          const torch::Tensor distance = psi((pos.unsqueeze(1) - pos.unsqueeze(0)).abs());  // [S, S]
          auto side = [&](const torch::Tensor& reach, const torch::Tensor& ks, const torch::Tensor& a,
                          const torch::Tensor& b) {
            const torch::Tensor x = distance / (psi(torch::maximum(reach, L)).unsqueeze(1) + eps);
            const torch::Tensor segment = torch::searchsorted(ks, x.detach().contiguous()).reshape(-1);
            return a.index_select(1, segment).view({H, S, S}) * x + b.index_select(1, segment).view({H, S, S});
          };
          torch::Tensor bias = side(pos, kinks, slope, intercept);
          if (!causal)
            bias = torch::where(query_minus_key(S) < 0,
                                side((S - 1) - pos, future_kinks, future_slope, future_intercept), bias);
          const torch::Tensor probs =
              probabilities(torch::matmul(q, k.transpose(-2, -1)) * scale + bias, causal, lengths);
          return torch::matmul(probs, v);
        };
        std::vector<torch::Tensor> leaves{q, k, v, slope, intercept, c, L};
        if (!causal) {
          leaves.push_back(future_slope);
          leaves.push_back(future_intercept);
        }
        expect_same_gradients(
            leaves, [&] { return ops::tile_attention_trainable(q, k, v, scale, causal, term(), kSoftmax, lengths); },
            reference, "S " + std::to_string(S) + (causal ? " causal" : " bidirectional") + (padded ? " padded" : ""));
      }
}

// CoPE (causal): each row's gates counted from the diagonal back and its q . e table interpolated
// at the count (capped at P - 1), against autograd through the fused CoPE term on the explicit
// scores; the gradients reach q and k through the gates too, and the table. Tables of 4 and 300
// positions: counts capped and not. The backward takes each row's gate total from the forward, or
// (a term without the forward's totals) counts the gates again.
TEST(TileAttentionGrad, CopeEqualsAutogradThroughTheFusedTermOnTheExplicitScoresInDouble) {
  torch::manual_seed(49);
  for (const int64_t S : kLengths)
    for (const int64_t P : {4, 300})
      for (const bool padded : {false, true}) {
        const bool recount = padded == (P == 4);  // each way capped and not, padded and not
        const int64_t H = 3, D = 8;
        const torch::Tensor q = leaf(heads(2, H, S, D)), k = leaf(heads(2, H, S, D)), v = leaf(heads(2, H, S, D));
        const torch::Tensor at_integers = leaf(torch::randn({2, H, S, P}, torch::kFloat64));
        const torch::Tensor lengths = padded ? key_lengths(S) : torch::Tensor();
        const double scale = 1.0 / std::sqrt(double(D));
        expect_same_gradients(
            {q, k, v, at_integers},
            [&] {
              ops::CopeTerm term{at_integers};
              if (recount) term.totals = nullptr;
              return ops::tile_attention_trainable(q, k, v, scale, true, TileTerm{term}, kSoftmax, lengths);
            },
            [&] {
              torch::Tensor scores =
                  (torch::matmul(q, k.transpose(-2, -1)) * scale).masked_fill(query_minus_key(S) < 0, -kInf);
              if (lengths.defined())
                scores = scores.masked_fill(torch::arange(S).view({1, 1, 1, S}) >= lengths.view({-1, 1, 1, 1}), -kInf);
              return torch::matmul(probabilities(scores + ops::cope_term(scores, at_integers), true, lengths), v);
            },
            "S " + std::to_string(S) + " P " + std::to_string(P) + (padded ? " padded" : "") +
                (recount ? " recounted" : ""));
      }
}

// CoPE under stick-breaking: each count sums the gates of keys j to i, the diagonal's included
// (CoPE's definition), though the sticks weigh only keys j < i; the forward in tiles against the
// fused term on the explicit scores and the sticks' log-space definition. Its backward in tiles
// visits keys from 0 up, which stick-breaking's scan from the query back cannot, so it is refused
// (attention then recomputes the gradient from explicit rows).
TEST(TileAttentionGrad, CopeUnderStickBreakingCountsTheDiagonalsGateAndHasNoBackwardInTiles) {
  torch::manual_seed(53);
  for (const int64_t S : kLengths)
    for (const bool padded : {false, true}) {
      SCOPED_TRACE("S " + std::to_string(S) + (padded ? " padded" : ""));
      const int64_t H = 2, D = 8, P = 6;
      const torch::Tensor q = heads(2, H, S, D), k = heads(2, H, S, D), v = heads(2, H, S, D);
      const torch::Tensor at_integers = torch::randn({2, H, S, P}, torch::kFloat64);
      const torch::Tensor lengths = padded ? key_lengths(S) : torch::Tensor();
      const double scale = 1.0 / std::sqrt(double(D));
      const auto to_query = ops::TileNormalizer::stick_breaking_remainder_to_query;
      const TileTerm term{ops::CopeTerm{at_integers}};
      torch::Tensor scores = (torch::matmul(q, k.transpose(-2, -1)) * scale).masked_fill(query_minus_key(S) < 0, -kInf);
      if (lengths.defined())
        scores = scores.masked_fill(torch::arange(S).view({1, 1, 1, S}) >= lengths.view({-1, 1, 1, 1}), -kInf);
      const torch::Tensor want =
          stick_breaking_reference(scores + ops::cope_term(scores, at_integers), v, lengths, true);
      EXPECT_LE((ops::tile_attention(q, k, v, scale, true, term, to_query, lengths) - want).abs().max().item<double>(),
                1e-12);
      EXPECT_THROW(ops::tile_attention_trainable(q, k, v, scale, true, term, to_query, lengths), c10::Error);
    }
}

// CoPE's backward adds its table's gradient once per run of keys sharing a count's floor index;
// a query row with a NaN (every count NaN, clamped to index 0) leaves every other row's table
// gradient as it is without the NaN, and nothing is written out of place (ASan in scripts/test.sh).
TEST(TileAttentionGrad, CopeWithANonFiniteScoreKeepsTheOtherRowsGradients) {
  torch::manual_seed(50);
  const int64_t H = 2, D = 8, S = 300, P = 300;
  const double scale = 1.0 / std::sqrt(double(D));
  const torch::Tensor k = heads(1, H, S, D), v = heads(1, H, S, D);
  const torch::Tensor at_integers = torch::randn({1, H, S, P}, torch::kFloat64);
  auto table_gradient = [&](const torch::Tensor& q) {
    const torch::Tensor table = leaf(at_integers.clone());
    ops::CopeTerm term{table};
    ops::tile_attention_trainable(leaf(q), leaf(k), leaf(v), scale, true, TileTerm{term}, kSoftmax, {})
        .sum()
        .backward();
    return table.grad();
  };
  const torch::Tensor q = heads(1, H, S, D);
  torch::Tensor bad = q.clone();
  bad[0][1][200][3] = std::numeric_limits<double>::quiet_NaN();  // one query row of head 1
  const torch::Tensor want = table_gradient(q), got = table_gradient(bad);
  EXPECT_TRUE(torch::equal(got[0][0], want[0][0]));                                      // head 0 untouched
  EXPECT_TRUE(torch::equal(got[0][1].narrow(0, 0, 200), want[0][1].narrow(0, 0, 200)));  // rows before it
}

// Float against double: the float backward within float's rounding of the double one.
TEST(TileAttentionGrad, FloatFollowsDoubleWithinItsRounding) {
  torch::manual_seed(44);
  const int64_t S = 300, H = 2, D = 32;
  const torch::Tensor q = heads(2, H, S, D), k = heads(2, H, S, D), v = heads(2, H, S, D);
  const torch::Tensor table = torch::randn({H, S, D}, torch::kFloat64);
  const torch::Tensor weights = torch::randn({2, H, S, D}, torch::kFloat64);
  std::vector<std::vector<torch::Tensor>> grads;
  for (const auto dtype : {torch::kFloat64, torch::kFloat32}) {
    const torch::Tensor lq = leaf(q.to(dtype)), lk = leaf(k.to(dtype)), lv = leaf(v.to(dtype)),
                        lt = leaf(table.to(dtype));
    const torch::Tensor out =
        ops::tile_attention_trainable(lq, lk, lv, 0.2, true, TileTerm{ops::RelativeTerm{lq, lt, {}, 0}});
    grads.push_back(torch::autograd::grad({(out * weights.to(dtype)).sum()}, {lq, lk, lv, lt}));
  }
  for (size_t i = 0; i < grads[0].size(); ++i) {
    const double size = grads[0][i].abs().max().item<double>();
    EXPECT_LE((grads[1][i].to(torch::kFloat64) - grads[0][i]).abs().max().item<double>(), 1e-4 * size) << "input " << i;
  }
}

// CoPE in float (its keys a vector at a time, common/cope_vectors.h: a table of 300 positions read
// through windows of the row, one of 20 too short for a window of 16-lane vectors and read key by
// key) within float's rounding of double, gates near 0 and 1 as well as between. The tables vary
// smoothly along the positions: d term / d count jumps at each integer count from one table
// difference to the next, and a count within rounding of an integer would take different sides
// in float and double; smooth rows keep those jumps small, while a wrong index still reads a value
// off by a step of the row.
TEST(TileAttentionGrad, CopeInFloatFollowsDoubleWithinItsRounding) {
  torch::manual_seed(45);
  const int64_t S = 300, H = 2, D = 16;
  const torch::Tensor q = heads(2, H, S, D, 3.0), k = heads(2, H, S, D), v = heads(2, H, S, D);
  const torch::Tensor weights = torch::randn({2, H, S, D}, torch::kFloat64);
  for (const int64_t P : {300, 20}) {
    const torch::Tensor p = torch::arange(P, torch::kFloat64);
    const torch::Tensor phase = torch::rand({2, H, S, 1}, torch::kFloat64) * 6.28;
    const torch::Tensor table =
        torch::sin(p / 7 + phase) + torch::randn({2, H, S, 1}, torch::kFloat64) * (p / P).pow(2);
    std::vector<std::vector<torch::Tensor>> results;
    for (const auto dtype : {torch::kFloat64, torch::kFloat32}) {
      const torch::Tensor lq = leaf(q.to(dtype)), lk = leaf(k.to(dtype)), lv = leaf(v.to(dtype)),
                          lt = leaf(table.to(dtype));
      const torch::Tensor out =
          ops::tile_attention_trainable(lq, lk, lv, 0.25, true, TileTerm{ops::CopeTerm{lt}}, kSoftmax, {});
      results.push_back(torch::autograd::grad({(out * weights.to(dtype)).sum()}, {lq, lk, lv, lt}));
      results.back().push_back(out.detach());
    }
    for (size_t i = 0; i < results[0].size(); ++i) {
      const double size = results[0][i].abs().max().item<double>();
      // 5e-4: counts are float sums of up to 300 gates, each term read at its count.
      EXPECT_LE((results[1][i].to(torch::kFloat64) - results[0][i]).abs().max().item<double>(), 5e-4 * size)
          << "P " << P << ", input " << i << " (4: the output)";
    }
  }
}

// Each (batch, head) pair's gradients come from one thread in a fixed order, and the tables' sum
// over the batch runs in batch order: the same bits at one thread and at two.
TEST(TileAttentionGrad, GradientsAreBitwiseEqualAcrossThreadCounts) {
  torch::manual_seed(45);
  const int64_t S = 131, H = 3, D = 16;
  const torch::Tensor q = heads(3, H, S, D).to(torch::kFloat32), k = heads(3, H, S, D).to(torch::kFloat32),
                      v = heads(3, H, S, D).to(torch::kFloat32);
  const torch::Tensor table = torch::randn({H, S, D}), values = torch::randn({H, S, D});
  const torch::Tensor weights = torch::randn({3, H, S, D});
  const int threads = at::get_num_threads();
  std::vector<std::vector<torch::Tensor>> grads;
  for (const int n : {1, 2}) {
    at::set_num_threads(n);
    const torch::Tensor lq = leaf(q), lk = leaf(k), lv = leaf(v), lt = leaf(table), lvals = leaf(values);
    const torch::Tensor out =
        ops::tile_attention_trainable(lq, lk, lv, 0.25, true, TileTerm{ops::RelativeTerm{lq, lt, lvals, 0}});
    grads.push_back(torch::autograd::grad({(out * weights).sum()}, {lq, lk, lv, lt, lvals}));
  }
  at::set_num_threads(threads);
  for (size_t i = 0; i < grads[0].size(); ++i) EXPECT_TRUE(torch::equal(grads[0][i], grads[1][i])) << "input " << i;
}

// A term without a backward in tiles, or rotations, is refused rather than differentiated wrongly.
TEST(TileAttentionGrad, RefusesTermsWithoutABackwardInTiles) {
  const torch::Tensor q = leaf(heads(1, 2, 9, 8)), k = leaf(heads(1, 2, 9, 8)), v = leaf(heads(1, 2, 9, 8));
  TileTerm rotations;
  rotations.far_q = heads(1, 2, 9, 8);
  rotations.far_k = heads(1, 2, 9, 8);
  rotations.far_threshold = 4;
  EXPECT_FALSE(ops::tile_attention_trains(rotations));
  EXPECT_THROW(ops::tile_attention_trainable(q, k, v, 0.3, true, rotations), c10::Error);
  EXPECT_FALSE(ops::tile_attention_trains(TileTerm{ops::FoxTerm{torch::zeros({1, 2, 9}, torch::kFloat64)}}));
  EXPECT_TRUE(ops::tile_attention_trains(TileTerm{}));
  EXPECT_TRUE(ops::tile_attention_trains(TileTerm{}, ops::TileNormalizer::stick_breaking));
  const TileTerm cope{ops::CopeTerm{torch::zeros({1, 2, 9, 4}, torch::kFloat64)}};
  EXPECT_TRUE(ops::tile_attention_trains(cope));
  EXPECT_FALSE(ops::tile_attention_trains(cope, ops::TileNormalizer::stick_breaking));  // keys from 0 up
}

}  // namespace tile_attention_grad_test
