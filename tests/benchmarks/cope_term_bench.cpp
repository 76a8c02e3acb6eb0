// The fused CoPE term (ops/cope_term) against the same term written with LibTorch's ops (gates,
// suffix sums, clamp, two gathers, the interpolation: what the family runs off the CPU), forward
// and forward + backward (gradients of the scores and of the table products). CPU, float32, one
// layer of the quickstart model (batch 16, 4 heads, 128 x 128 causal scores, 128 positions) and
// one 512-row block of a 4096-token evaluation (1 x 4 heads x 512 x 4096, 128 positions).
// Numbers only. Run: build/release/tests/benchmarks/bench_cope_term
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <string>

#include "roformer/model/position/cope.h"
#include "roformer/ops/cope_term/cope_term.h"

namespace {

torch::Tensor unfused(const torch::Tensor& scores, const torch::Tensor& at_integers) {
  const torch::Tensor pos = roformer::model::cope_positions(scores, at_integers.size(-1));
  const torch::Tensor floor = pos.floor();
  const torch::Tensor w = pos - floor;
  const torch::Tensor low = at_integers.gather(-1, floor.to(torch::kLong));
  const torch::Tensor high = at_integers.gather(-1, pos.ceil().to(torch::kLong));
  return high * w + low * (1 - w);
}

void run(benchmark::State& state, bool fused, bool backward, int64_t batch, int64_t rows, int64_t keys) {
  torch::manual_seed(0);
  const int64_t heads = 4, positions = 128;
  torch::Tensor scores = torch::randn({batch, heads, rows, keys});
  const torch::Tensor hidden = torch::ones({rows, keys}, torch::kBool).triu(keys - rows + 1);
  scores = scores.masked_fill(hidden, -std::numeric_limits<float>::infinity()).requires_grad_(backward);
  const torch::Tensor at_integers = torch::randn({batch, heads, rows, positions}).requires_grad_(backward);
  const torch::Tensor up = torch::randn({batch, heads, rows, keys});
  auto step = [&] {
    if (!backward) {
      const torch::NoGradGuard no_grad;
      benchmark::DoNotOptimize(
          (fused ? roformer::ops::cope_term(scores, at_integers) : unfused(scores, at_integers)).data_ptr());
      return;
    }
    const torch::Tensor z = fused ? roformer::ops::cope_term(scores, at_integers) : unfused(scores, at_integers);
    z.backward(up);
    scores.mutable_grad().reset();
    at_integers.mutable_grad().reset();
  };
  for (int i = 0; i < 2; ++i) step();
  for (auto _ : state) step();
  state.counters["pairs/s"] = benchmark::Counter(static_cast<double>(batch * heads * rows * keys),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
  struct Shape {
    const char* name;
    int64_t batch, rows, keys;
  };
  for (const Shape& s : {Shape{"quickstart-layer", 16, 128, 128}, Shape{"eval-4096-block", 1, 512, 4096}})
    for (bool backward : {false, true})
      for (bool fused : {false, true}) {
        const std::string name =
            std::string("cpu/") + s.name + (backward ? "/fwd+bwd/" : "/fwd/") + (fused ? "fused" : "unfused");
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
          run(st, fused, backward, s.batch, s.rows, s.keys);
        })->Unit(benchmark::kMillisecond);
      }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
