// The optimizer step on the quickstart model's parameters: LibTorch's torch::optim::AdamW (a
// dozen kernels per tensor) against FusedAdamW (ATen's `_fused_adamw_`, one call per group),
// same groups and gradients. Numbers for notes; run: build/release/tests/benchmarks/bench_optimizer
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "roformer/common/build_info.h"
#include "roformer/config/config_loader.h"
#include "roformer/model/encoder.h"
#include "roformer/train/step.h"

using namespace roformer;

namespace {

model::EncoderModel quickstart_model() {
  const auto loaded = config::load_config(roformer::build_info().source_dir + "/configs/quickstart/rope.yaml");
  model::EncoderModel m = model::build_model(loaded.config.model, 1);
  for (auto& p : m->parameters()) p.mutable_grad() = torch::randn_like(p) * 1e-3;
  return m;
}

void BM_LibTorchAdamW(benchmark::State& state) {
  at::set_num_threads(static_cast<int>(state.range(0)));
  model::EncoderModel m = quickstart_model();
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& p : m->parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(
      decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(1e-3).weight_decay(0.01)));
  groups.emplace_back(no_decay,
                      std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(1e-3).weight_decay(0)));
  torch::optim::AdamW opt(groups, torch::optim::AdamWOptions(1e-3));
  for (auto _ : state) opt.step();
  state.counters["params"] = static_cast<double>(model::count_parameters(*m));
}

void BM_FusedAdamW(benchmark::State& state) {
  at::set_num_threads(static_cast<int>(state.range(0)));
  model::EncoderModel m = quickstart_model();
  config::TrainConfig t;
  auto opt = train::make_optimizer(m, t);
  for (auto _ : state) opt->step();
  state.counters["params"] = static_cast<double>(model::count_parameters(*m));
}

}  // namespace

BENCHMARK(BM_LibTorchAdamW)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FusedAdamW)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
