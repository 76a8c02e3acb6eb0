// The fused residual add + LayerNorm op against LibTorch's add then layer_norm on the CPU, forward
// and forward + backward (gradients of x, residual, weight and bias), at the quickstart layer's
// shape (16 x 128 tokens, width 128) and a BERT-base layer's (8 x 512 tokens, width 768), float32.
// Numbers only; nothing here passes or fails.
// Run: build/release/tests/benchmarks/bench_norm [--benchmark_filter=768]
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "roformer/ops/add_layer_norm.h"

namespace {

torch::Tensor add_norm(bool fused, const torch::Tensor& x, const torch::Tensor& r, const torch::Tensor& w,
                       const torch::Tensor& b) {
  if (fused) return roformer::ops::add_layer_norm(x, r, w, b, 1e-12);
  return at::layer_norm(x + r, {x.size(-1)}, w, b, 1e-12);
}

// args: tokens, width, fused (0/1), backward (0/1)
void add_layer_norm(benchmark::State& state) {
  const int64_t tokens = state.range(0), width = state.range(1);
  const bool fused = state.range(2) != 0, backward = state.range(3) != 0;
  torch::manual_seed(0);
  const torch::Tensor x = torch::randn({tokens, width}).requires_grad_(backward);
  const torch::Tensor r = torch::randn({tokens, width}).requires_grad_(backward);
  const torch::Tensor w = torch::randn({width}).requires_grad_(backward);
  const torch::Tensor b = torch::randn({width}).requires_grad_(backward);
  const torch::Tensor up = torch::randn({tokens, width});
  for (auto _ : state) {
    if (backward) {
      torch::Tensor y = add_norm(fused, x, r, w, b);
      y.backward(up);
      benchmark::DoNotOptimize(x.grad().data_ptr());
      for (const torch::Tensor* t : {&x, &r, &w, &b}) t->mutable_grad().reset();
    } else {
      const torch::NoGradGuard no_grad;
      benchmark::DoNotOptimize(add_norm(fused, x, r, w, b).data_ptr());
    }
  }
  state.SetLabel(std::string(fused ? "fused" : "reference") + (backward ? " fwd+bwd" : " fwd"));
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK(add_layer_norm)
    ->ArgNames({"tokens", "width", "fused", "bwd"})
    ->ArgsProduct({{2048}, {128}, {0, 1}, {0, 1}})
    ->ArgsProduct({{4096}, {768}, {0, 1}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
