// The fused residual add + LayerNorm op against LibTorch's add then layer_norm, forward and
// forward + backward (gradients of x, residual, weight and bias). CPU, float32: the quickstart
// layer's shape (16 x 128 tokens, width 128) and a BERT-base layer's (8 x 512, width 768). CUDA,
// when a GPU is visible: BERT-base's training batch (32 x 512, width 768) in bf16 and float32,
// 20 launches per timed iteration and one synchronize, with a device copy of the same bytes
// (read x and residual, write y: 3 tensors forward; 7 forward + backward) as the anchor; GB/s
// counts those bytes for every row, so the ratios are time ratios. Numbers only.
// Run: build/release/tests/benchmarks/bench_norm [--benchmark_filter=cuda]
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <string>

#include "roformer/common/autocast.h"
#include "roformer/ops/add_layer_norm/add_layer_norm.h"

namespace {

enum class Impl { reference, fused, copy };
constexpr int kLaunches = 20;  // per timed iteration on CUDA

torch::Tensor add_norm(Impl impl, const torch::Tensor& x, const torch::Tensor& r, const torch::Tensor& w,
                       const torch::Tensor& b) {
  if (impl == Impl::fused) return roformer::ops::add_layer_norm(x, r, w, b, 1e-12);
  // As the model runs it: bf16 activations, fp32 parameters, LibTorch's layer_norm under autocast.
  const roformer::AutocastGuard autocast(x.is_cuda() && x.scalar_type() == torch::kBFloat16);
  return at::layer_norm(x + r, {x.size(-1)}, w, b, 1e-12);
}

struct Inputs {
  torch::Tensor x, r, w, b, up, copy_src, copy_dst;
};

Inputs make_inputs(int64_t tokens, int64_t width, torch::Dtype dtype, torch::Device device, bool backward) {
  torch::manual_seed(0);
  const auto opts = torch::TensorOptions().dtype(dtype).device(device);
  Inputs in;
  in.x = torch::randn({tokens, width}, opts).requires_grad_(backward);
  in.r = torch::randn({tokens, width}, opts).requires_grad_(backward);
  in.w = torch::randn({width}, opts.dtype(torch::kFloat32)).requires_grad_(backward);
  in.b = torch::randn({width}, opts.dtype(torch::kFloat32)).requires_grad_(backward);
  in.up = torch::randn({tokens, width}, opts);
  // The copy moves the bytes the fused op must, (3 or 7) x tokens x width elements, half of them read.
  const int64_t passes = backward ? 7 : 3;
  in.copy_src = torch::randn({passes * tokens / 2, width}, opts);
  in.copy_dst = torch::empty_like(in.copy_src);
  return in;
}

void step(Impl impl, const Inputs& in, bool backward) {
  if (impl == Impl::copy) {
    in.copy_dst.copy_(in.copy_src);
  } else if (backward) {
    torch::Tensor y = add_norm(impl, in.x, in.r, in.w, in.b);
    y.backward(in.up);
    for (const torch::Tensor* t : {&in.x, &in.r, &in.w, &in.b}) t->mutable_grad().reset();
  } else {
    const torch::NoGradGuard no_grad;
    benchmark::DoNotOptimize(add_norm(impl, in.x, in.r, in.w, in.b).data_ptr());
  }
}

void run(benchmark::State& state, Impl impl, int64_t tokens, int64_t width, torch::Dtype dtype, bool cuda,
         bool backward) {
  const Inputs in = make_inputs(tokens, width, dtype, cuda ? torch::kCUDA : torch::kCPU, backward);
  const int launches = cuda ? kLaunches : 1;
  for (int i = 0; i < 3; ++i) step(impl, in, backward);  // warm-up (allocator, kernels)
  if (cuda) torch::cuda::synchronize();
  for (auto _ : state) {
    for (int i = 0; i < launches; ++i) step(impl, in, backward);
    if (cuda) torch::cuda::synchronize();
  }
  const double bytes = static_cast<double>((backward ? 7 : 3) * tokens * width * in.x.element_size());
  state.counters["GB/s"] =
      benchmark::Counter(bytes * launches, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens * launches), benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
  const char* names[] = {"reference", "fused", "copy"};
  struct Shape {
    int64_t tokens, width;
    torch::Dtype dtype;
    bool cuda;
  };
  std::vector<Shape> shapes{{2048, 128, torch::kFloat32, false}, {4096, 768, torch::kFloat32, false}};
  if (torch::cuda::is_available())
    for (auto dtype : {torch::kBFloat16, torch::kFloat32}) shapes.push_back({16384, 768, dtype, true});
  for (const Shape& s : shapes)
    for (bool backward : {false, true})
      for (Impl impl : {Impl::reference, Impl::fused, Impl::copy}) {
        if (impl == Impl::copy && !s.cuda) continue;
        const std::string name = std::string(s.cuda ? "cuda/" : "cpu/") + std::to_string(s.tokens) + "x" +
                                 std::to_string(s.width) + "/" + c10::toString(s.dtype) + "/" +
                                 (backward ? "fwd+bwd/" : "fwd/") + names[static_cast<int>(impl)];
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
          run(st, impl, s.tokens, s.width, s.dtype, s.cuda, backward);
        })->Unit(benchmark::kMicrosecond);
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
