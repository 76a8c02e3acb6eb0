// Fused RoPE vs the unfused LibTorch composite (rotate_half with cached cos/sin tables, as
// Hugging Face does it) vs a plain copy of the same bytes, forward and forward+backward, in
// GB/s of q and k read plus written. CUDA cases are added when a GPU is visible. The host
// allocator is tuned as the roformer binary tunes it (common/host_memory.h).
// scripts/bench/bench_rope.sh runs this and prints the ratios of one run.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#ifdef ROFORMER_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "roformer/common/host_memory.h"
#include "roformer/model/position/rope_frequencies.h"
#include "roformer/ops/rope/rope.h"

namespace {

struct Shape {
  int64_t B, S, H, D;
};

void sync(const torch::Device& device) {
#ifdef ROFORMER_WITH_CUDA
  if (device.is_cuda()) c10::cuda::device_synchronize();
#endif
}

torch::Tensor rotate_half(const torch::Tensor& x) {
  const int64_t h = x.size(-1) / 2;
  return torch::cat({-x.narrow(-1, h, h), x.narrow(-1, 0, h)}, -1);
}

enum class Impl { fused, fused_table, composite, copy };

void run(benchmark::State& state, Shape sh, torch::ScalarType dtype, torch::Device device, Impl impl, bool backward) {
  const auto opts = torch::TensorOptions().dtype(dtype).device(device);
  torch::Tensor q = torch::randn({sh.B, sh.S, sh.H, sh.D}, opts), k = torch::randn({sh.B, sh.S, sh.H, sh.D}, opts);
  const torch::Tensor pos = torch::arange(sh.S, torch::dtype(torch::kLong).device(device));
  const roformer::model::RopeFrequencies f =
      roformer::model::rope_frequencies(roformer::config::RopeConfig{}, sh.D, sh.S);
  roformer::ops::RopeSpec spec;
  spec.inv_freq = torch::tensor(f.inv_freq, torch::kFloat64);
  spec.interleaved = false;  // the same pairing as the rotate_half composite
  spec.layout = roformer::ops::RopeLayout::bshd;
  if (impl == Impl::fused_table)  // the model's setting: (cos, sin) cached once per (device, length)
    spec.cos_sin = roformer::ops::rope_table(spec.inv_freq, 1.0, sh.S).to(device);
  // Composite tables: emb = cat(freqs, freqs), [S, 1, D], cached once as Hugging Face does.
  const torch::Tensor inv = torch::tensor(f.inv_freq, torch::kFloat64).to(device);
  const torch::Tensor freqs = pos.to(torch::kFloat64).unsqueeze(1) * inv;
  const torch::Tensor emb = torch::cat({freqs, freqs}, -1).unsqueeze(1);
  const torch::Tensor cos = emb.cos().to(dtype), sin = emb.sin().to(dtype);
  if (backward && impl != Impl::copy) {
    q.requires_grad_();
    k.requires_grad_();
  }
  const torch::Tensor grad = torch::ones_like(q);
  // Forward: the fused op runs in place and the copy goes into preallocated buffers, so both
  // measure the kernel rather than the allocator's page faults; the composite allocates its
  // temporaries, as it does in a model. Forward+backward: autograd for both (allocating).
  torch::Tensor q_dst = torch::empty_like(q), k_dst = torch::empty_like(k);
  for (auto _ : state) {
    std::vector<torch::Tensor> out;
    if (impl == Impl::fused || impl == Impl::fused_table) {
      if (backward) {
        out = roformer::ops::rope({q, k}, pos, spec);
      } else {
        roformer::ops::rope_({q, k}, pos, spec);
      }
    } else if (impl == Impl::composite) {
      out = {q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin};
    } else {
      q_dst.copy_(q);
      k_dst.copy_(k);
      if (backward) {  // the backward pass moves the same bytes again
        q_dst.copy_(grad);
        k_dst.copy_(grad);
      }
    }
    if (backward && impl != Impl::copy) torch::autograd::backward({out[0], out[1]}, {grad, grad});
    sync(device);
    benchmark::DoNotOptimize(out.data());
  }
  const int64_t bytes_one_pass = 2 /*q,k*/ * 2 /*read+write*/ * q.numel() * q.element_size();
  state.SetBytesProcessed(state.iterations() * bytes_one_pass * (backward ? 2 : 1));
}

}  // namespace

int main(int argc, char** argv) {
  roformer::tune_host_allocator();  // as in `roformer`: allocating cases reuse warm heap pages
  std::vector<torch::Device> devices{torch::kCPU};
  if (torch::cuda::is_available()) devices.emplace_back(torch::kCUDA, 0);
  for (const torch::Device& device : devices)
    for (Shape sh : {Shape{8, 512, 12, 64}, Shape{1, 8192, 32, 128}})
      for (auto dtype : {torch::kFloat32, torch::kBFloat16})
        for (bool backward : {false, true})
          for (auto [impl, name] : {std::pair{Impl::fused, "fused"}, std::pair{Impl::fused_table, "table"},
                                    std::pair{Impl::composite, "composite"}, std::pair{Impl::copy, "copy"}}) {
            const std::string label = std::string(device.is_cuda() ? "cuda" : "cpu") + "/" + std::to_string(sh.B) +
                                      "x" + std::to_string(sh.S) + "x" + std::to_string(sh.H) + "x" +
                                      std::to_string(sh.D) + "/" + (dtype == torch::kFloat32 ? "fp32" : "bf16") + "/" +
                                      (backward ? "fwd+bwd" : "fwd") + "/" + name;
            benchmark::RegisterBenchmark(label.c_str(), run, sh, dtype, device, impl, backward)
                ->Unit(benchmark::kMillisecond)
                ->UseRealTime()
                ->MinTime(device.is_cuda() ? 0.5 : 1.0);
          }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
