// metrics.jsonl writer and the step record (see metrics.h).
#include "roformer/run/metrics.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/common/progress.h"
#include "roformer/common/strings.h"

namespace roformer::run {

using nlohmann::json;

MetricsWriter::MetricsWriter(const std::string& path, int64_t keep_up_to_step) : path_(path) {
  std::string kept;
  if (path_exists(path)) {
    std::istringstream in(read_text_file(path));
    std::string line;
    while (std::getline(in, line)) {
      try {
        if (!line.empty() && json::parse(line).value("step", int64_t{-1}) <= keep_up_to_step) kept += line + "\n";
      } catch (const std::exception&) {  // a line cut by a crash
      }
    }
  }
  write_file_atomic(path, kept);
  out_.open(path, std::ios::app);
  if (!out_) throw UserError("cannot append to " + path);
}

void MetricsWriter::add_tensorboard(std::unique_ptr<TensorBoardWriter> writer, const std::string& logdir,
                                    int64_t resume_step) {
  tensorboard_ = std::move(writer);
  tensorboard_->open(logdir, resume_step > 0 ? resume_step + 1 : 0);
}

void MetricsWriter::write(const json& record) {
  if (!out_.is_open()) return;
  out_ << record.dump() << "\n";
  out_.flush();
  if (tensorboard_) tensorboard_->write(record);
}

json StepRecord::to_json() const {
  json r{{"type", "train"},  {"step", step},           {"loss", loss},
         {"lr", lr},         {"grad_norm", grad_norm}, {"tokens_per_s", tokens_per_s},
         {"tflops", tflops}, {"elapsed_s", elapsed_s}, {"tokens", tokens}};
  if (mfu >= 0) r["mfu"] = mfu;
  if (peak_mem_gib >= 0) r["peak_mem_gib"] = peak_mem_gib;
  return r;
}

std::string StepRecord::line() const {
  auto rounded = [](double v, double scale) { return shortest_double(std::round(v * scale) / scale); };
  char lr_text[32];
  std::snprintf(lr_text, sizeof lr_text, "%.3g", lr);  // 3.33e-04, not 0.0003333333333333333
  std::string s = "step " + std::to_string(step) + "/" + std::to_string(steps) + " | loss " + rounded(loss, 1e4) +
                  " | lr " + lr_text + " | grad " + rounded(grad_norm, 1e3) + " | " +
                  std::to_string(static_cast<int64_t>(tokens_per_s)) + " tok/s | " + rounded(tflops, 100) + " TFLOP/s";
  if (mfu >= 0) s += " | MFU " + rounded(mfu * 100, 10) + "%";
  // The rest of the run at this window's rate (every step trains the same number of tokens).
  if (step > 0 && steps > step && tokens_per_s > 0)
    s += " | ETA " + Progress::format_duration(double(steps - step) * (double(tokens) / double(step)) / tokens_per_s);
  return s;
}

}  // namespace roformer::run
