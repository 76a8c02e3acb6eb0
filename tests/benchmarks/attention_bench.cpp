// The short-sequence attention op against LibTorch's SDPA (on the CPU its flash kernel, the
// strongest PyTorch way; what the compiled PyTorch peer calls too), forward (no grad) and forward +
// backward (gradients of q, k and v), CPU float32, q, k, v as the model passes them ([B, H, S, D]
// views of one fused QKV projection). Shapes: the quickstart layer (16 x 128 tokens, 4 heads of 32),
// the medium one of scripts/bench/bench_vs_pytorch.sh (8 x 256, 8 heads of 64), and causal and longer
// variants (the frontier study's training; 512, the last whole square; 1024 and 2048 in blocks of query rows). GFLOP/s
// counts the products (4 S^2 D per head forward, 8 S^2 D more backward; causal counted in full), so the ratios are time
// ratios. The rope+ pairs add RoPE (interleaved, as RoFormer's) to both: LibTorch's way applies
// the rope op to q and k and calls SDPA, ours passes the projection and the rotation tables to
// short_attention_qkv (the model's path), whose gradient is the projection's in one tensor. The
// cope+ pairs add CoPE's term (a table of 128 positions, its gradient included): the explicit
// scores (LibTorch's products, the fused CoPE term, softmax; the model's path before) against
// short_attention_cope. The tiles side is tile_attention without a term (forward only). The task
// model's evaluation shapes (32 x 1024 and 2048 tokens, 4 heads of 16) run the plain sides alone,
// forward only: SDPA, short_attention and tiles.
// Numbers only; for a median and spread over interleaved runs add
// --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true.
// Run: build/release/tests/benchmarks/bench_attention [--benchmark_filter=128]
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "roformer/ops/cope_term/cope_term.h"
#include "roformer/ops/rope/rope.h"
#include "roformer/ops/short_attention/short_attention.h"
#include "roformer/ops/tile_attention/tile_attention.h"

namespace {

struct Shape {
  int64_t batch, heads, seq, head_dim;
  bool causal;
  bool plain_forward_only = false;  // the sides without RoPE or CoPE, forward only
};

enum class Side { sdpa, ours, tiles, rope_sdpa, rope_ours, cope_explicit, cope_ours };

struct Inputs {
  torch::Tensor packed;            // [B, S, 3 H D]
  std::vector<torch::Tensor> qkv;  // [B, H, S, D] views of it
  torch::Tensor inv_freq, positions, rotation;
  torch::Tensor at_integers;  // [B, H, S, 128], CoPE's q . e[p]
};

torch::Tensor cope_explicit(const Inputs& in, bool causal) {
  const torch::Tensor& q = in.qkv[0];
  torch::Tensor scores = at::matmul(q, in.qkv[1].transpose(-2, -1)) / std::sqrt(double(q.size(3)));
  if (causal)
    scores = scores.masked_fill(torch::ones({q.size(2), q.size(2)}, torch::kBool).triu(1),
                                -std::numeric_limits<double>::infinity());
  return at::matmul(torch::softmax(scores + roformer::ops::cope_term(scores, in.at_integers), -1), in.qkv[2]);
}

torch::Tensor attend(Side side, const Inputs& in, int64_t heads, bool causal) {
  if (side == Side::cope_explicit) return cope_explicit(in, causal);
  if (side == Side::cope_ours)
    return roformer::ops::short_attention_cope(in.qkv[0], in.qkv[1], in.qkv[2], in.at_integers,
                                               1.0 / std::sqrt(double(in.qkv[0].size(3))), causal);
  if (side == Side::ours) return roformer::ops::short_attention(in.qkv[0], in.qkv[1], in.qkv[2], causal);
  if (side == Side::tiles)
    return roformer::ops::tile_attention(in.qkv[0], in.qkv[1], in.qkv[2], 1.0 / std::sqrt(double(in.qkv[0].size(3))),
                                         causal, roformer::ops::TileTerm{});
  if (side == Side::rope_ours)
    return roformer::ops::short_attention_qkv(in.packed, {}, heads, causal, in.rotation, /*interleaved=*/true);
  std::vector<torch::Tensor> qk{in.qkv[0], in.qkv[1]};
  if (side == Side::rope_sdpa) {
    roformer::ops::RopeSpec spec;
    spec.inv_freq = in.inv_freq;
    qk = roformer::ops::rope(qk, in.positions, spec);
  }
  return at::scaled_dot_product_attention(qk[0], qk[1], in.qkv[2], std::nullopt, 0.0, causal);
}

void run(benchmark::State& state, Side side, Shape s, bool backward) {
  torch::manual_seed(0);
  const int64_t width = s.heads * s.head_dim;
  Inputs in;
  in.packed = torch::randn({s.batch, s.seq, 3 * width}).requires_grad_(backward);
  for (const torch::Tensor& t : in.packed.split(width, -1))
    in.qkv.push_back(t.view({s.batch, s.seq, s.heads, s.head_dim}).transpose(1, 2));
  in.inv_freq = torch::pow(10000.0, -torch::arange(0, s.head_dim, 2, torch::kFloat64) / double(s.head_dim));
  in.positions = torch::arange(s.seq, torch::kLong);
  in.rotation = roformer::ops::short_attention_rotation(in.inv_freq, 1.0, 1.0, true, in.positions, torch::kFloat);
  in.at_integers = torch::randn({s.batch, s.heads, s.seq, 128}).requires_grad_(backward);
  const torch::Tensor up = torch::randn({s.batch, s.heads, s.seq, s.head_dim});
  auto once = [&] {
    if (backward) {
      attend(side, in, s.heads, s.causal).backward(up);
      in.packed.mutable_grad().reset();
      in.at_integers.mutable_grad().reset();
    } else {
      const torch::NoGradGuard no_grad;
      benchmark::DoNotOptimize(attend(side, in, s.heads, s.causal).data_ptr());
    }
  };
  for (int i = 0; i < 3; ++i) once();
  for (auto _ : state) once();
  const double flops = double(s.batch * s.heads) * double(s.seq * s.seq * s.head_dim) * (backward ? 12.0 : 4.0);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void register_all() {
  const std::vector<Shape> shapes{{16, 4, 128, 32, false},       {16, 4, 128, 32, true},       {8, 8, 256, 64, false},
                                  {8, 8, 256, 64, true},         {4, 8, 512, 64, false},       {4, 8, 512, 64, true},
                                  {2, 4, 1024, 32, false},       {2, 4, 1024, 32, true},       {1, 4, 2048, 32, true},
                                  {32, 4, 1024, 16, true, true}, {32, 4, 2048, 16, true, true}};
  for (const Shape& s : shapes)
    for (bool backward : {false, true})
      for (const auto& [side, label] :
           {std::pair{Side::sdpa, "sdpa"}, std::pair{Side::ours, "short_attention"}, std::pair{Side::tiles, "tiles"},
            std::pair{Side::rope_sdpa, "rope+sdpa"}, std::pair{Side::rope_ours, "rope+short_attention_qkv"},
            std::pair{Side::cope_explicit, "cope+explicit"}, std::pair{Side::cope_ours, "cope+short_attention"}}) {
        if (side == Side::tiles && backward) continue;  // tile_attention has no autograd
        const bool plain = side == Side::sdpa || side == Side::ours || side == Side::tiles;
        if (s.plain_forward_only && (backward || !plain)) continue;
        const std::string name = "cpu/B" + std::to_string(s.batch) + "xH" + std::to_string(s.heads) + "xS" +
                                 std::to_string(s.seq) + "xD" + std::to_string(s.head_dim) +
                                 (s.causal ? "/causal" : "") + (backward ? "/fwd+bwd/" : "/fwd/") + label;
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
          run(st, side, s, backward);
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
