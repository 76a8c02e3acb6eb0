// What LibTorch dispatched for attention, seen from outside our code: a RecordFunction observer
// collects the ATen ops that run on this thread, and each SDPA kernel name of the probe
// (model/attention_kernel.h) maps to the ATen op that implements it. Tests compare the two, so
// the probe's report is checked against what actually ran. Header-only (test executables link
// roformer_core; the support library does not).
#pragma once

#include <ATen/record_function.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "roformer/model/attention_kernel.h"

namespace roformer::testing {

// The ATen ops run on this thread while it lives (forward ops; autograd's backward may run on
// other threads).
class AtenOpObserver {
 public:
  AtenOpObserver() {
    current() = &ops_;
    handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(&on_start).scopes({at::RecordScope::FUNCTION}));
  }
  ~AtenOpObserver() {
    at::removeCallback(handle_);
    current() = nullptr;
  }
  AtenOpObserver(const AtenOpObserver&) = delete;
  AtenOpObserver& operator=(const AtenOpObserver&) = delete;

  const std::set<std::string>& ops() const { return ops_; }

 private:
  static std::set<std::string>*& current() {
    thread_local std::set<std::string>* ops = nullptr;
    return ops;
  }
  static std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
    if (current() != nullptr) current()->insert(fn.name());
    return nullptr;
  }
  std::set<std::string> ops_;
  at::CallbackHandle handle_ = 0;
};

// The ATen ops that implement SDPA, by the probe's kernel name on the CPU or on CUDA.
inline std::map<std::string, std::string> sdpa_implementation_ops(bool cuda) {
  return {{"sdpa-math", "aten::_scaled_dot_product_attention_math"},
          {"sdpa-flash",
           cuda ? "aten::_scaled_dot_product_flash_attention" : "aten::_scaled_dot_product_flash_attention_for_cpu"},
          {"sdpa-efficient", "aten::_scaled_dot_product_efficient_attention"},
          {"sdpa-cudnn", "aten::_scaled_dot_product_cudnn_attention"},
          {"sdpa-overrideable", "aten::_scaled_dot_product_fused_attention_overrideable"}};
}

// The SDPA implementation ops among `observed`.
inline std::set<std::string> observed_sdpa_ops(const std::set<std::string>& observed, bool cuda) {
  std::set<std::string> out;
  for (const auto& [kernel, op] : sdpa_implementation_ops(cuda))
    if (observed.count(op)) out.insert(op);
  return out;
}

// The ops a probe's kernel list stands for (its non-SDPA kernels stand for none).
inline std::set<std::string> expected_sdpa_ops(const std::vector<std::string>& kernels, bool cuda) {
  const auto table = sdpa_implementation_ops(cuda);
  std::set<std::string> out;
  for (const std::string& k : kernels)
    if (table.count(k)) out.insert(table.at(k));
  return out;
}

struct ObservedAttention {
  std::vector<std::string> kernels;  // what the probe reported
  std::set<std::string> sdpa_ops;    // the SDPA implementation ops that ran
};

// Runs `work` under a kernel probe and an op observer.
template <typename Work>
ObservedAttention observe_attention(bool cuda, Work&& work) {
  model::AttentionKernelProbe probe;
  AtenOpObserver observer;
  work();
  return {probe.kernels(), observed_sdpa_ops(observer.ops(), cuda)};
}

}  // namespace roformer::testing
