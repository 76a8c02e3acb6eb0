// The TensorBoard writer: scalars from metrics records, and the Python child that writes the
// event files with the tensorboard package (see tensorboard_writer.h).
#include "roformer/run/tensorboard_writer.h"

#include <chrono>
#include <cmath>

#include "roformer/common/build_info.h"
#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/common/log.h"

namespace roformer::run {
namespace {

using nlohmann::json;

// Answers "ready" once the package is imported (before the run writes anything), then takes
// {"open": logdir, "purge_from": N, "wall": t} and one event per line {"step", "wall", "scalars":
// [[tag, value], ...]} until its input ends, and closes the file.
constexpr const char* kWriterProgram = R"PY(
import json, sys
try:
    from tensorboard.compat.proto.event_pb2 import Event, SessionLog
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
except ImportError:
    sys.stderr.write("the Python package 'tensorboard' is missing in " + sys.executable +
                     ": pip install tensorboard, or set ROFORMER_PYTHON to a Python that has it\n")
    sys.exit(3)
sys.stdout.write("ready\n")
sys.stdout.flush()
writer = None
for line in sys.stdin:
    r = json.loads(line)
    if "open" in r:
        writer = EventFileWriter(r["open"], flush_secs=10)
        if r["purge_from"] > 0:  # TensorBoard drops earlier sessions' events from this step on
            writer.add_event(Event(wall_time=r["wall"], step=r["purge_from"],
                                   session_log=SessionLog(status=SessionLog.START)))
        continue
    values = [Summary.Value(tag=tag, simple_value=value) for tag, value in r["scalars"]]
    writer.add_event(Event(wall_time=r["wall"], step=r["step"], summary=Summary(value=values)))
if writer is not None:
    writer.close()
)PY";

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void add_scalars(const json& object, const std::string& prefix, std::vector<std::pair<std::string, double>>& out) {
  for (const auto& [key, value] : object.items()) {
    if (key == "step" || key == "type" || key == "split") continue;
    if (value.is_number() && std::isfinite(value.get<double>())) out.emplace_back(prefix + key, value.get<double>());
    if (value.is_object()) add_scalars(value, prefix, out);  // fine-tuning's "metrics": {accuracy, f1, ...}
  }
}

}  // namespace

std::vector<std::pair<std::string, double>> tensorboard_scalars(const json& record) {
  std::vector<std::pair<std::string, double>> out;
  if (!record.is_object() || !record.contains("step") || !record["step"].is_number_integer()) return out;
  const std::string type =
      record.contains("type") && record["type"].is_string() ? record["type"].get<std::string>() : "";
  if (type != "train" && type != "eval") return out;  // "init" and the like carry no curve
  std::string prefix = type + "/";
  if (record.contains("split") && record["split"].is_string()) prefix += record["split"].get<std::string>() + "/";
  add_scalars(record, prefix, out);
  return out;
}

TensorBoardWriter::TensorBoardWriter() : wait_s_(helper_timeout_seconds()) {
  const std::string python = checked_service_python("train.tensorboard needs Python with the tensorboard package",
                                                    ", or train.tensorboard=false");
  child_ = std::make_unique<LineChild>(std::vector<std::string>{python, "-c", kWriterProgram},
                                       "the TensorBoard writer (" + python + ")");
  std::string ready;
  const LineRead r = child_->read_line(ready, wait_s_);
  if (r == LineRead::line && ready == "ready") return;
  if (r != LineRead::closed) child_->kill();
  const std::string what = r == LineRead::line ? "the TensorBoard writer (" + python + ") answered '" +
                                                     ready.substr(0, 80) + "' instead of 'ready'"
                                               : child_->describe(r, wait_s_);
  throw UserError("train.tensorboard: " + what + "; pip install tensorboard there, set ROFORMER_PYTHON, or " +
                  "train.tensorboard=false");
}

void TensorBoardWriter::open(const std::string& logdir, int64_t purge_from_step) {
  make_directories(logdir);
  send(json{{"open", logdir}, {"purge_from", purge_from_step}, {"wall", wall_seconds()}});
}

void TensorBoardWriter::send(const json& line) {
  if (broken_) return;
  if (!child_->write_line(line.dump(), wait_s_)) {
    broken_ = true;
    child_->kill();
    log::warn("the TensorBoard writer (pid ", child_->pid(), ") has stopped; metrics.jsonl keeps every record");
  }
}

void TensorBoardWriter::write(const json& record) {
  const auto scalars = tensorboard_scalars(record);
  if (scalars.empty()) return;
  json line{{"step", record["step"]}, {"wall", wall_seconds()}, {"scalars", json::array()}};
  for (const auto& [tag, value] : scalars) line["scalars"].push_back({tag, value});
  send(line);
}

}  // namespace roformer::run
