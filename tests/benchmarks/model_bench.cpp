// Forward+backward time of the quickstart models (one per position family) on this machine, and
// softmax against linear attention (RoPE, causal, one sequence) from 512 to 8192 tokens: where
// the O(S^2) and O(S) curves cross, in time and in peak memory. Numbers only; nothing here passes
// or fails.
// Run: build/release/tests/benchmarks/bench_model [--benchmark_filter=attention]
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <fstream>
#include <string>

#include "roformer/common/build_info.h"
#include "roformer/config/config_loader.h"
#include "roformer/model/encoder.h"

namespace {

// Resident memory of this process in MiB: the current size, or the high-water mark since the
// last reset_peak_rss() (Linux: writing 5 to /proc/self/clear_refs resets VmHWM).
double rss_mib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;  // kB
  return 0;
}
void reset_peak_rss() {
  std::ofstream("/proc/self/clear_refs") << "5";
}

void fwd_bwd(benchmark::State& state, const std::string& family) {
  const auto loaded =
      roformer::config::load_config(roformer::build_info().source_dir + "/configs/quickstart/" + family + ".yaml");
  const auto& cfg = loaded.config;
  roformer::model::EncoderModel model = roformer::model::build_model(cfg.model, 1);
  model->train();
  const int64_t B = cfg.train.batch_size, S = cfg.data.seq_len;
  const torch::Tensor ids = torch::randint(0, cfg.model.vocab_size, {B, S}, torch::kLong);
  torch::Tensor targets = torch::full({B, S}, -100, torch::kLong);
  targets.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, S, 7)}, 5);  // ~15% scored, like MLM
  for (auto _ : state) {
    model->zero_grad();
    torch::Tensor loss = model->loss({ids}, targets);
    loss.backward();
    benchmark::DoNotOptimize(loss.item<float>());
  }
  state.counters["params"] = static_cast<double>(roformer::model::count_parameters(*model));
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(B * S), benchmark::Counter::kIsIterationInvariantRate);
}

// One causal RoPE sequence of state.range(0) tokens through the quickstart model, softmax or
// linear (elu1) attention.
void attention_length(benchmark::State& state, const std::string& attention) {
  auto loaded = roformer::config::load_config(roformer::build_info().source_dir + "/configs/quickstart/rope.yaml",
                                              {"model.attention=" + attention});
  roformer::model::EncoderModel model = roformer::model::build_model(loaded.config.model, 1);
  model->train();
  const int64_t S = state.range(0);
  const torch::Tensor ids = torch::randint(0, loaded.config.model.vocab_size, {1, S}, torch::kLong);
  reset_peak_rss();
  const double before = rss_mib("VmRSS");
  for (auto _ : state) {
    model->zero_grad();
    torch::Tensor loss = model->loss({ids}, ids);
    loss.backward();
    benchmark::DoNotOptimize(loss.item<float>());
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(S), benchmark::Counter::kIsIterationInvariantRate);
  // Peak resident growth over the step (activations, scores, gradients); large tensors are
  // mmapped by glibc and returned on free, so each benchmark starts near the same baseline.
  state.counters["peak_MiB"] = rss_mib("VmHWM") - before;
}

}  // namespace

BENCHMARK_CAPTURE(attention_length, softmax, std::string("softmax"))
    ->RangeMultiplier(2)
    ->Range(512, 8192)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);
BENCHMARK_CAPTURE(attention_length, linear, std::string("linear"))
    ->RangeMultiplier(2)
    ->Range(512, 8192)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);
BENCHMARK_CAPTURE(fwd_bwd, rope, std::string("rope"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(fwd_bwd, sinusoidal, std::string("sinusoidal"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(fwd_bwd, learned, std::string("learned"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(fwd_bwd, t5_bias, std::string("t5_bias"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(fwd_bwd, alibi, std::string("alibi"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(fwd_bwd, none, std::string("none"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(fwd_bwd, shaw, std::string("shaw"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(fwd_bwd, transformer_xl, std::string("transformer_xl"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(fwd_bwd, deberta, std::string("deberta"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(fwd_bwd, xpos, std::string("xpos"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(fwd_bwd, fire, std::string("fire"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(fwd_bwd, kerple, std::string("kerple"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(fwd_bwd, sandwich, std::string("sandwich"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(fwd_bwd, cope, std::string("cope"))->Unit(benchmark::kMillisecond)->MinTime(2.0);

BENCHMARK_MAIN();
