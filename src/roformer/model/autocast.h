// bf16 autocast on CUDA for a forward pass (RAII), shared by training and evaluation; a no-op
// when disabled (the CPU runs fp32). Matmuls and attention run in bf16, reductions such as the
// loss stay in fp32 (LibTorch's autocast op lists).
#pragma once

#include <ATen/autocast_mode.h>

namespace roformer::model {

class AutocastGuard {
 public:
  explicit AutocastGuard(bool enabled) : enabled_(enabled) {
    if (!enabled_) return;
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(at::kCUDA, false);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool enabled_;
};

}  // namespace roformer::model
