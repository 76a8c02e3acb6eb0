// MLM and causal-LM batches per second for the quickstart shapes (batch 16 x 128) from the
// prepared linux-docs byte dataset, to compare with the train step time (bench_model).
// Skips (with a message) when data/prepared/linux-docs-byte is missing.
#include <benchmark/benchmark.h>

#include "roformer/common/build_info.h"
#include "roformer/common/files.h"
#include "roformer/data/batches.h"

namespace {

const std::string kDataset = roformer::build_info().source_dir + "/data/prepared/linux-docs-byte";

void batches(benchmark::State& state, roformer::config::Objective objective, roformer::config::DataSampling sampling) {
  if (!roformer::path_exists(kDataset + "/meta.json")) {
    state.SkipWithError("prepare the dataset first: scripts/quickstart.sh (or roformer prepare-data)");
    return;
  }
  const auto meta = roformer::data::read_dataset_meta(kDataset);
  auto store = std::make_shared<const roformer::data::TokenStore>(kDataset, meta, "train");
  roformer::data::TrainBatcher batcher(store, objective, 128, 16, 0, 1, 1, sampling,
                                       roformer::data::MaskingRule::from(meta, roformer::config::DataConfig{}));
  int64_t step = 0;
  for (auto _ : state) benchmark::DoNotOptimize(batcher.batch(step++).input_ids.data_ptr());
  state.counters["batches/s"] = benchmark::Counter(1, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK_CAPTURE(batches, mlm_random, roformer::config::Objective::mlm, roformer::config::DataSampling::random);
BENCHMARK_CAPTURE(batches, mlm_packed, roformer::config::Objective::mlm, roformer::config::DataSampling::packed);
BENCHMARK_CAPTURE(batches, causal_random, roformer::config::Objective::causal_lm,
                  roformer::config::DataSampling::random);
BENCHMARK_MAIN();
