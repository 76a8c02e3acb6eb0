// Length-extrapolation evaluation of one checkpoint: loss/perplexity at each evaluation
// length under one protocol (chunks or sliding), with the loss by position inside the window
// (8 buckets, or every position and its cumulative mean with eval.per_token); a task
// checkpoint (data.task) is scored on its task's examples instead: exact match and token
// accuracy per length. Lengths a family cannot run (a learned table too short) are reported
// as not applicable. Results are written as JSON and CSV and printed as a table.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "roformer/config/config.h"
#include "roformer/eval/evaluate.h"
#include "roformer/eval/temperature_fit.h"
#include "roformer/model/encoder.h"

namespace roformer::eval {

struct LengthResult {
  int64_t length = 0;
  int64_t size = 0;  // the task's instance size at this length (eval.task_sizes); 0: lengths were asked
  bool applicable = true;
  std::string reason;  // when not applicable
  EvalResult result;
  double seconds = 0;       // wall time of this length's evaluation
  double peak_mem_gib = 0;  // peak device memory during it (CUDA; 0 on the CPU)
  std::string attention;    // the attention kernel(s) it ran: "sdpa-flash", ... (model/attention_kernel.h)
};

struct ExtrapolationReport {
  std::string checkpoint, split, protocol, scaling;
  std::string precision;  // fp32, or bf16 (autocast on CUDA or the CPU)
  int64_t stride = 0, train_length = 0;
  int64_t step = -1;  // the checkpoint's optimizer steps (meta.json); -1: not recorded
  std::string position;
  std::string methods;     // what evaluation applies on top of the family: "yarn x8, log-n past 128", or "none"
  bool per_token = false;  // loss_by_position has one entry per position (eval.per_token)
  std::string task;        // the synthetic task (data.task) a task checkpoint is scored on; empty: the corpus
  int64_t holdout = 0;     // data.task.holdout
  std::vector<int64_t> task_sizes;  // eval.task_sizes: [first, last(, step)] scored in place of lengths
  std::vector<LengthResult> lengths;
  std::optional<TemperatureFit> temperature;  // eval.fit_temperature: DroPE's fitted c
};

// A checkpoint ready for evaluation: its saved config with `overrides` applied (runtime keys
// only: the architecture must match), the model with its weights, on the device.
struct LoadedCheckpoint {
  config::Config config;
  model::EncoderModel model{nullptr};
  torch::Device device = torch::kCPU;
};
LoadedCheckpoint load_for_eval(const std::string& checkpoint_dir, const std::vector<std::string>& overrides);

// The mean loss over eval.lengths of the checkpoint on the corpus's eval.split with `overrides`
// applied, without a line per length (DroPE's temperature fit).
double mean_corpus_loss(const std::string& checkpoint_dir, const std::vector<std::string>& overrides);

// Evaluates eval.lengths on eval.split under eval.protocol (first fitting DroPE's temperature
// under eval.fit_temperature).
ExtrapolationReport evaluate_checkpoint(const std::string& checkpoint_dir, const std::vector<std::string>& overrides);

// Every method evaluation applies on top of the trained family ("yarn x8, log-n past 128"), or
// "none"; warns when a RoPE method cannot change the family.
std::string applied_methods(const config::ModelConfig& model);

// Ruoss et al.'s score under eval.task_sizes: the token accuracy averaged over the sizes scored
// (each size counts once, whatever its length); -1 without task sizes.
double mean_size_accuracy(const ExtrapolationReport& report);

std::string report_json(const ExtrapolationReport& report);
std::string report_csv(const ExtrapolationReport& report);
std::string report_table(const ExtrapolationReport& report);

}  // namespace roformer::eval
