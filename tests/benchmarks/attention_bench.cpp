// The short-sequence attention op against LibTorch's SDPA (on the CPU its flash kernel, the
// strongest PyTorch way; what the compiled PyTorch peer calls too), forward (no grad) and forward +
// backward (gradients of q, k and v), CPU float32, q, k, v as the model passes them ([B, H, S, D]
// views of one fused QKV projection). Shapes: the quickstart layer (16 x 128 tokens, 4 heads of 32),
// the medium one of scripts/bench_vs_pytorch.sh (8 x 256, 8 heads of 64), and causal and longer
// variants (the frontier study's training; 512, the op's limit). GFLOP/s counts the products (4 S^2 D
// per head forward, 8 S^2 D more backward; causal counted in full), so the ratios are time
// ratios. Numbers only; for a median and spread over interleaved runs add
// --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true.
// Run: build/release/tests/benchmarks/bench_attention [--benchmark_filter=128]
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "roformer/ops/short_attention.h"

namespace {

struct Shape {
  int64_t batch, heads, seq, head_dim;
  bool causal;
};

torch::Tensor attend(bool ours, const std::vector<torch::Tensor>& qkv, bool causal) {
  if (ours) return roformer::ops::short_attention(qkv[0], qkv[1], qkv[2], causal);
  return at::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], std::nullopt, 0.0, causal);
}

void run(benchmark::State& state, bool ours, Shape s, bool backward) {
  torch::manual_seed(0);
  const int64_t width = s.heads * s.head_dim;
  const torch::Tensor packed = torch::randn({s.batch, s.seq, 3 * width}).requires_grad_(backward);
  std::vector<torch::Tensor> qkv;
  for (const torch::Tensor& t : packed.split(width, -1))
    qkv.push_back(t.view({s.batch, s.seq, s.heads, s.head_dim}).transpose(1, 2));
  const torch::Tensor up = torch::randn({s.batch, s.heads, s.seq, s.head_dim});
  auto once = [&] {
    if (backward) {
      attend(ours, qkv, s.causal).backward(up);
      packed.mutable_grad().reset();
    } else {
      const torch::NoGradGuard no_grad;
      benchmark::DoNotOptimize(attend(ours, qkv, s.causal).data_ptr());
    }
  };
  for (int i = 0; i < 3; ++i) once();
  for (auto _ : state) once();
  const double flops = double(s.batch * s.heads) * double(s.seq * s.seq * s.head_dim) * (backward ? 12.0 : 4.0);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void register_all() {
  const std::vector<Shape> shapes{{16, 4, 128, 32, false}, {16, 4, 128, 32, true}, {8, 8, 256, 64, false},
                                  {8, 8, 256, 64, true},   {4, 8, 512, 64, false}, {4, 8, 512, 64, true}};
  for (const Shape& s : shapes)
    for (bool backward : {false, true})
      for (bool ours : {false, true}) {
        const std::string name = "cpu/B" + std::to_string(s.batch) + "xH" + std::to_string(s.heads) + "xS" +
                                 std::to_string(s.seq) + "xD" + std::to_string(s.head_dim) +
                                 (s.causal ? "/causal" : "") + (backward ? "/fwd+bwd/" : "/fwd/") +
                                 (ours ? "short_attention" : "sdpa");
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
          run(st, ours, s, backward);
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
