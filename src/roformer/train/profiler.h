// Step profiler: records train.profile_steps steps, starting at step train.profile_start,
// with LibTorch's Kineto (CUPTI) profiler, writes a Chrome/Perfetto trace and a summary (GPU
// busy fraction of the wall time, the kernels that take the most device time) to the run
// directory. This is how to see where a step's time goes on a GPU without Nsight Systems.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace roformer::train {

class StepProfiler {
 public:
  // Inactive when steps == 0. Output: out_dir/profile_trace.json and out_dir/profile_summary.txt.
  StepProfiler(int64_t start_step, int64_t steps, std::string out_dir, const torch::Device& device);
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  void before_step(int64_t step);  // `step` is about to run
  void after_step(int64_t step);   // `step` has been issued

 private:
  void stop();
  int64_t start_, end_;
  std::string out_dir_;
  torch::Device device_;
  bool active_ = false;
  std::chrono::steady_clock::time_point wall_start_;
};

}  // namespace roformer::train
