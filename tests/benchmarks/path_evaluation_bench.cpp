// PaTH's evaluation off the CPU's tiles: the sweep with an online softmax
// (model::path_attention_swept) against the explicit scores in blocks of query rows, as
// attention forms them where no tile form runs (path_scores per block, softmax, the product with
// the values; rows per block as a GPU's whole-mask limit gives them). One layer of BERT-base
// width (1 x 12 heads x 64); the explicit scores in PaTH's default blocks of 32 tokens, the sweep
// in 32, 64 and 128 (evaluation takes 128); key blocks formed in each timing; and the CPU's own
// evaluation, tile attention with PaTH's walk, as the anchor on this device; float32, CPU.
// Numbers only. Run: build/release/tests/benchmarks/bench_path_evaluation
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <algorithm>
#include <limits>

#include "roformer/model/attention_mask.h"
#include "roformer/model/position/path.h"
#include "roformer/ops/tile_attention/tile_attention.h"

namespace {

using roformer::model::PathKeyBlocks;

torch::Tensor explicit_scores(const torch::Tensor& q, const torch::Tensor& v, const PathKeyBlocks& keys, double scale) {
  const int64_t B = q.size(0), H = q.size(1), S = q.size(2);
  const int64_t rows = roformer::model::query_block_rows(double(B * H * S) * 4.0, S,
                                                         roformer::model::AttentionMask::kWholeMaskBytes, torch::kCUDA);
  torch::Tensor out = torch::empty_like(q);
  for (int64_t begin = 0; begin < S; begin += rows) {
    const int64_t end = std::min(S, begin + rows);
    torch::Tensor s = roformer::model::path_scores(q, keys, begin, end) * scale;
    const torch::Tensor i = torch::arange(begin, end).view({-1, 1}), j = torch::arange(S).view({1, -1});
    s.masked_fill_(j > i, -std::numeric_limits<float>::infinity());
    out.narrow(2, begin, end - begin).copy_(torch::matmul(torch::softmax(s, -1), v));
  }
  return out;
}

void run(benchmark::State& state, bool sweep, bool tiles, int64_t S, int64_t block) {
  torch::manual_seed(0);
  torch::NoGradGuard no_grad;
  const int64_t B = 1, H = 12, D = 64;
  const torch::Tensor q = torch::randn({B, H, S, D}), k = torch::randn({B, H, S, D}), v = torch::randn({B, H, S, D});
  torch::Tensor w = torch::randn({B, H, S, D});
  w = w / w.norm(2, -1, true);
  const torch::Tensor beta = 2.0 * torch::rand({B, H, S});
  if (tiles) {  // the CPU's evaluation: tile attention with PaTH's walk
    const torch::Tensor layer = torch::cat({w, beta.unsqueeze(-1), torch::zeros({B, H, S, 1})}, -1);
    const roformer::ops::TileTerm term{roformer::ops::PathTerm{layer, false}};
    for (auto _ : state) benchmark::DoNotOptimize(roformer::ops::tile_attention(q, k, v, 0.125, true, term).data_ptr());
    state.SetItemsProcessed(state.iterations() * S);
    return;
  }
  for (auto _ : state) {
    const torch::Tensor out = sweep
                                  ? roformer::model::path_attention_swept(q, k, v, {w, beta}, {}, 0.125, block)
                                  : explicit_scores(q, v, roformer::model::path_key_blocks(k, {w, beta}, block), 0.125);
    benchmark::DoNotOptimize(out.data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * S);
}

}  // namespace

int main(int argc, char** argv) {
  for (int64_t S : {1024, 4096})
    for (bool sweep : {false, true})
      for (int64_t block : {32, 64, 128}) {
        if (!sweep && block != 32) continue;  // the explicit scores' blocks: PaTH's default
        benchmark::RegisterBenchmark((std::string("PathEvaluation/") + (sweep ? "sweep" : "explicit") +
                                      "/S:" + std::to_string(S) + "/block:" + std::to_string(block))
                                         .c_str(),
                                     [sweep, S, block](benchmark::State& st) { run(st, sweep, false, S, block); })
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
  for (int64_t S : {1024, 4096})
    benchmark::RegisterBenchmark(("PathEvaluation/tiles/S:" + std::to_string(S)).c_str(),
                                 [S](benchmark::State& st) { run(st, false, true, S, 32); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
