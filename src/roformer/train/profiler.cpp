// See profiler.h.
#include "roformer/train/profiler.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "roformer/common/files.h"
#include "roformer/common/log.h"

namespace roformer::train {
namespace {

namespace kp = torch::autograd::profiler;
namespace pi = torch::profiler::impl;

struct Interval {
  uint64_t start, end;
};

// Length of the union of intervals (overlapping kernels on several streams count once).
uint64_t union_length(std::vector<Interval> v) {
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  uint64_t total = 0, cur_s = 0, cur_e = 0;
  bool open = false;
  for (const Interval& i : v) {
    if (open && i.start <= cur_e) {
      cur_e = std::max(cur_e, i.end);
      continue;
    }
    if (open) total += cur_e - cur_s;
    cur_s = i.start;
    cur_e = i.end;
    open = true;
  }
  if (open) total += cur_e - cur_s;
  return total;
}

struct Row {
  uint64_t ns = 0;
  int64_t calls = 0;
};

std::vector<std::pair<std::string, Row>> sorted_rows(const std::map<std::string, Row>& m) {
  std::vector<std::pair<std::string, Row>> rows(m.begin(), m.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  return rows;
}

std::string shorten(const std::string& s, size_t n) {
  return s.size() > n ? s.substr(0, n - 3) + "..." : s;
}

// "aten::add([16384, 768] BFloat16, [16384, 768] Float)"
std::string describe_op(const kp::KinetoEvent& e) {
  std::string s = e.name();
  if (!e.hasShapes()) return s;
  const auto shapes = e.shapes();
  const auto dtypes = e.hasTypes() ? e.dtypes() : c10::ArrayRef<std::string>();
  s += "(";
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (shapes[i].empty() && (i >= dtypes.size() || dtypes[i].empty())) continue;
    if (s.back() != '(') s += ", ";
    s += "[";
    for (size_t d = 0; d < shapes[i].size(); ++d) s += (d ? ", " : "") + std::to_string(shapes[i][d]);
    s += "]";
    if (i < dtypes.size()) s += " " + dtypes[i];
  }
  return s + ")";
}

// Device time by kernel and by the ATen op that launched it (a kernel's linked correlation id
// is its launching op's id; graph replays have no launching op: "(graph replay)").
std::string summarize(const kp::ProfilerResult& result, double wall_s, int64_t steps) {
  std::map<uint64_t, std::string> op_names;  // correlation id -> CPU op with its input shapes and dtypes
  for (const kp::KinetoEvent& e : result.events())
    if (e.deviceType() == c10::DeviceType::CPU) op_names.emplace(e.correlationId(), describe_op(e));
  std::map<std::string, Row> by_kernel, by_op;
  std::vector<Interval> spans;
  uint64_t total = 0;
  for (const kp::KinetoEvent& e : result.events()) {
    if (e.deviceType() != c10::DeviceType::CUDA || e.durationNs() == 0) continue;
    const auto op = op_names.find(e.linkedCorrelationId());
    const std::string op_name = op == op_names.end() ? "(graph replay)" : op->second;
    for (Row* r : {&by_kernel[e.name()], &by_op[op_name]}) {
      r->ns += e.durationNs();
      r->calls += 1;
    }
    total += e.durationNs();
    spans.push_back({e.startNs(), e.endNs()});
  }
  const double busy_s = static_cast<double>(union_length(spans)) / 1e9;
  std::ostringstream out;
  char line[512];
  if (spans.empty()) {
    std::snprintf(line, sizeof line, "profiled %lld steps: wall %.2f ms/step, no device events (a CPU run)\n",
                  static_cast<long long>(steps), 1e3 * wall_s / steps);
  } else {
    std::snprintf(line, sizeof line,
                  "profiled %lld steps: wall %.2f ms/step, GPU busy %.2f ms/step (%.1f %%), %zu device events/step\n",
                  static_cast<long long>(steps), 1e3 * wall_s / steps, 1e3 * busy_s / steps,
                  wall_s > 0 ? 100 * busy_s / wall_s : 0.0, spans.size() / static_cast<size_t>(steps));
  }
  out << line;
  auto table = [&](const char* title, const std::map<std::string, Row>& m, size_t limit) {
    out << "   ms/step  share  calls/step  " << title << "\n";
    const auto rows = sorted_rows(m);
    for (size_t i = 0; i < rows.size() && i < limit; ++i) {
      const Row& r = rows[i].second;
      std::snprintf(line, sizeof line, "%10.3f %5.1f%% %10.1f  %s\n", r.ns / 1e6 / steps,
                    total ? 100.0 * r.ns / total : 0.0, static_cast<double>(r.calls) / steps,
                    shorten(rows[i].first, 150).c_str());
      out << line;
    }
  };
  if (spans.empty()) {  // a CPU run: ATen ops by inclusive time (nested ops also count in their callers)
    std::map<std::string, Row> cpu_ops;
    for (const kp::KinetoEvent& e : result.events()) {
      if (e.deviceType() != c10::DeviceType::CPU || e.name().rfind("aten::", 0) != 0) continue;
      Row& r = cpu_ops[e.name()];
      r.ns += e.durationNs();
      r.calls += 1;
      total += e.durationNs();
    }
    table("ATen op (CPU, inclusive time)", cpu_ops, 25);
    return out.str();
  }
  table("kernel", by_kernel, 25);
  table("launched by", by_op, 20);
  return out.str();
}

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

}  // namespace

StepProfiler::StepProfiler(int64_t start_step, int64_t steps, std::string out_dir, const torch::Device& device)
    : start_(start_step), end_(steps > 0 ? start_step + steps : -1), out_dir_(std::move(out_dir)), device_(device) {}

StepProfiler::~StepProfiler() {
  if (!active_) return;
  try {
    kp::disableProfiler();
  } catch (...) {  // a destructor during unwinding: the trace is lost, nothing else
  }
}

void StepProfiler::before_step(int64_t step) {
  if (step != start_ || end_ < 0) return;
  std::set<pi::ActivityType> activities{pi::ActivityType::CPU};
  if (device_.is_cuda()) activities.insert(pi::ActivityType::CUDA);
  const pi::ProfilerConfig config(pi::ProfilerState::KINETO, /*report_input_shapes=*/true);
  try {
    kp::prepareProfiler(config, activities);
    synchronize(device_);
    kp::enableProfiler(config, activities);
  } catch (const std::exception& e) {
    log::warn("profiler could not start (", e.what(), "); training continues unprofiled");
    end_ = -1;
    return;
  }
  active_ = true;
  wall_start_ = std::chrono::steady_clock::now();
  log::info("profiling steps ", start_, " to ", end_ - 1);
}

void StepProfiler::after_step(int64_t step) {
  if (active_ && step + 1 >= end_) stop();
}

void StepProfiler::stop() {
  synchronize(device_);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
  active_ = false;
  std::unique_ptr<kp::ProfilerResult> result = kp::disableProfiler();
  const std::string trace = out_dir_ + "/profile_trace.json";
  const std::string summary = summarize(*result, wall_s, end_ - start_);
  result->save(trace);
  write_file_atomic(out_dir_ + "/profile_summary.txt", summary);
  log::info("profile: ", trace, " (open in https://ui.perfetto.dev)\n", summary);
}

}  // namespace roformer::train
