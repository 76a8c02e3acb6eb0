// The bucketed tables' tile term: its checks, its tables in the launch's dtype and the distance
// from which the buckets stop changing.
#include "roformer/ops/tile_attention/terms/buckets.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

#include "roformer/ops/tile_attention/terms/buckets_kernel.h"

namespace roformer::ops {
namespace bucket_tile_tables {

// The first distance from which neither bucket index changes (S - 1 at most), and the last up to
// which neither has changed (-origin at least; -origin - 1 without keys after the query); qb and
// kb index distance d at [d].
std::pair<int64_t, int64_t> constant_ends(const int64_t* qb, const int64_t* kb, int64_t origin, int64_t S) {
  int64_t from = S - 1;
  while (from > -origin && qb[from - 1] == qb[from] && kb[from - 1] == kb[from]) --from;
  int64_t to = -origin - 1;
  if (origin > 0) {
    to = -origin;
    while (to < S - 1 && qb[to + 1] == qb[to] && kb[to + 1] == kb[to]) ++to;
  }
  return {std::max<int64_t>(from, 0), to};
}

void check(const BucketTerm& term, const torch::Tensor& q) {
  const bool shaped = term.by_query.defined() && term.by_key.defined() && term.query_bucket.defined() &&
                      term.key_bucket.defined() && term.by_query.dim() == 4 &&
                      term.by_query.sizes().slice(0, 3) == q.sizes().slice(0, 3) && term.by_key.dim() == 4 &&
                      term.by_key.size(0) == q.size(0) && term.by_key.size(1) == q.size(1) &&
                      term.by_key.size(2) == term.by_query.size(3) && term.by_key.size(3) == q.size(2);
  const int64_t S = q.size(2), span = term.origin + S;
  TORCH_CHECK(shaped && term.origin >= 0 && term.query_bucket.numel() == span && term.key_bucket.numel() == span,
              "roformer::tile_attention: buckets need by_query [B, H, S, R], by_key [B, H, R, S] and two bucket "
              "indices [origin + S] for q ",
              q.sizes(), " and origin ", term.origin);
  const int64_t R = term.by_query.size(3);
  for (const at::Tensor& b : {term.query_bucket, term.key_bucket})
    TORCH_CHECK(b.numel() == 0 || (b.min().item<int64_t>() >= 0 && b.max().item<int64_t>() < R),
                "roformer::tile_attention: bucket indices must lie in [0, ", R, ")");
}

// The term's tables as the loop reads them (checked), the tensors behind them in `keep`.
BucketTables describe(const BucketTerm& term, const at::Tensor& q, const TileAttentionLaunch& launch,
                      std::vector<at::Tensor>& keep) {
  check(term, q);
  TORCH_CHECK(launch.causal || term.origin == launch.seq - 1,
              "roformer::tile_attention: buckets for bidirectional attention need the keys after the query, origin "
              "S - 1 = ",
              launch.seq - 1, "; got origin ", term.origin);
  const at::Tensor by_query = term.by_query.to(q.scalar_type()).contiguous();
  const at::Tensor by_key = term.by_key.to(q.scalar_type()).contiguous();
  const at::Tensor query_bucket = term.query_bucket.to(at::kLong).contiguous();
  const at::Tensor key_bucket = term.key_bucket.to(at::kLong).contiguous();
  BucketTables tables;
  tables.by_query = by_query.data_ptr();
  tables.by_key = by_key.data_ptr();
  tables.query_bucket = query_bucket.data_ptr<int64_t>() + term.origin;  // [d]: distance d
  tables.key_bucket = key_bucket.data_ptr<int64_t>() + term.origin;
  tables.buckets = term.by_query.size(3);
  std::tie(tables.constant_from, tables.constant_to) =
      constant_ends(tables.query_bucket, tables.key_bucket, term.origin, launch.seq);
  keep = {by_query, by_key, query_bucket, key_bucket};
  return tables;
}

}  // namespace bucket_tile_tables

void run_tiles(const BucketTerm& term, const torch::Tensor& q, const TileAttentionLaunch& launch) {
  std::vector<at::Tensor> keep;
  const BucketTables tables = bucket_tile_tables::describe(term, q, launch, keep);
  tile_attention_cpu(launch, bucket_items(launch.dtype), &tables);
}

std::vector<torch::Tensor> grad_tensors(const BucketTerm& term) {
  return {term.by_query, term.by_key};
}

std::vector<torch::Tensor> run_tile_grads(const BucketTerm& term, const torch::Tensor& q,
                                          const TileAttentionLaunch& launch, const TileAttentionGrad& grad) {
  std::vector<at::Tensor> keep;
  BucketTables tables = bucket_tile_tables::describe(term, q, launch, keep);
  const at::Tensor grad_by_query = at::zeros(keep[0].sizes(), keep[0].options());
  const at::Tensor grad_by_key = at::zeros(keep[1].sizes(), keep[1].options());
  tables.grad_by_query = grad_by_query.data_ptr();
  tables.grad_by_key = grad_by_key.data_ptr();
  tile_attention_grad_cpu(launch, grad, bucket_grad_pairs(launch.dtype), &tables);
  return {grad_by_query.mul_(launch.scale).to(term.by_query.scalar_type()),
          grad_by_key.mul_(launch.scale).to(term.by_key.scalar_type())};
}

}  // namespace roformer::ops
