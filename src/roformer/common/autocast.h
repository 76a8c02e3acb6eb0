// bf16 autocast for a forward pass (RAII), shared by training and evaluation: on CUDA (training
// and evaluation) or on the CPU (evaluation asked for bf16, whose matmuls and attention then run
// on the CPU's bf16 units); a no-op when disabled. Matmuls and attention run in bf16, reductions
// such as the loss stay in fp32 (LibTorch's autocast op lists).
#pragma once

#include <ATen/autocast_mode.h>
#include <c10/core/DispatchKeySet.h>

namespace roformer {

class AutocastGuard {
 public:
  explicit AutocastGuard(bool enabled, at::DeviceType type = at::kCUDA) : enabled_(enabled), type_(type) {
    if (!enabled_) return;
    at::autocast::set_autocast_enabled(type_, true);
    at::autocast::set_autocast_dtype(type_, at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(type_, false);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool enabled_;
  at::DeviceType type_;
};

// While alive, autocast keeps no cast copies of the weights (each is cast where it is used): for
// an inference pass, which reads each weight once, so the bf16 copies do not all live at once.
class AutocastCacheOff {
 public:
  AutocastCacheOff() : was_(at::autocast::is_autocast_cache_enabled()) {
    at::autocast::set_autocast_cache_enabled(false);
  }
  ~AutocastCacheOff() { at::autocast::set_autocast_cache_enabled(was_); }
  AutocastCacheOff(const AutocastCacheOff&) = delete;
  AutocastCacheOff& operator=(const AutocastCacheOff&) = delete;

 private:
  bool was_;
};

// Whether autocast is on for the device `x` lives on.
inline bool autocast_on(const at::Tensor& x) {
  const at::DeviceType type = x.device().type();
  return (type == at::kCUDA || type == at::kCPU) && at::autocast::is_autocast_enabled(type);
}

// The dispatch keys that code choosing its own dtypes excludes (CUDA's and the CPU's autocast).
inline c10::DispatchKeySet autocast_keys() {
  return c10::DispatchKeySet({c10::DispatchKey::AutocastCUDA, c10::DispatchKey::AutocastCPU});
}

}  // namespace roformer
