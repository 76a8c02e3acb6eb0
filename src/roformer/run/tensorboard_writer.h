// TensorBoard event files for a run (train.tensorboard): the scalars of metrics.jsonl's records
// go, as they are written, to a Python child process that encodes them with the tensorboard
// package's own event writer (its protobuf messages and record framing) in RUN/tensorboard/.
// The encoding is that maintained library's; this side only names the scalars.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "roformer/common/line_child.h"

namespace roformer::run {

// The scalars of one metrics.jsonl record as (tag, value): "train/loss", "eval/ppl",
// "eval/dev/accuracy" (a record's "split" and nested "metrics" become part of the tag); "step",
// "type", "split", non-numbers and non-finite numbers are not scalars. Records that are not "train" or
// "eval" or have no integer step give none.
std::vector<std::pair<std::string, double>> tensorboard_scalars(const nlohmann::json& record);

class TensorBoardWriter {
 public:
  // Starts the writer process and waits until it has imported the package, so a run checks it
  // before writing anything (at most helper_timeout_seconds()); throws UserError naming the
  // Python and the fix.
  TensorBoardWriter();
  // Opens an event file in `logdir`. With `purge_from_step` > 0 (a run resumed at step N passes
  // N + 1) it first logs a session start there, so TensorBoard drops what earlier sessions logged
  // from that step on, as metrics.jsonl drops its records past N.
  void open(const std::string& logdir, int64_t purge_from_step);
  void write(const nlohmann::json& record);  // a metrics.jsonl record

 private:
  void send(const nlohmann::json& line);

  double wait_s_;  // helper_timeout_seconds(): its start and each write
  std::unique_ptr<LineChild> child_;
  bool broken_ = false;  // the child went away: warned once, then silent
};

}  // namespace roformer::run
