// Training metrics: metrics.jsonl (one JSON object per line), optionally mirrored to TensorBoard,
// and the step line of the log. On resume, records past the checkpoint's step (written before a
// crash) are dropped so the file matches an uninterrupted run.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "roformer/run/tensorboard_writer.h"

namespace roformer::run {

class MetricsWriter {
 public:
  MetricsWriter() = default;  // disabled (ranks other than 0)
  MetricsWriter(const std::string& path, int64_t keep_up_to_step);
  // Also write every record's scalars as TensorBoard events in `logdir` through `writer` (started
  // before the run wrote anything); a run resumed at step N passes N (0: a fresh run).
  void add_tensorboard(std::unique_ptr<TensorBoardWriter> writer, const std::string& logdir, int64_t resume_step);
  void write(const nlohmann::json& record);

 private:
  std::string path_;
  std::ofstream out_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
};

// One logged training step: what metrics.jsonl and the log line carry.
struct StepRecord {
  int64_t step = 0, steps = 0, tokens = 0;
  double loss = 0, lr = 0, grad_norm = 0;
  double tokens_per_s = 0, tflops = 0, elapsed_s = 0;
  double mfu = -1;           // < 0: no peak known, not reported
  double peak_mem_gib = -1;  // < 0: not on CUDA
  nlohmann::json to_json() const;
  std::string line() const;  // "step 20/40 | loss 2.1 | lr 0.001 | grad 0.9 | 20000 tok/s | 0.03 TFLOP/s"
};

}  // namespace roformer::run
