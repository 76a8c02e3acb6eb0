// A position table kept on the device it is used on, rebuilt only when the device, the
// sequence length or the dtype changes (training: built once; evaluation: once per length).
// Tables depend on configuration only, never on learned weights, so caching is exact.
#pragma once

#include <torch/types.h>

#include <functional>

namespace roformer::model {

class TableCache {
 public:
  // The cached table for (device, length, dtype), built by `build()` on a miss.
  const torch::Tensor& get(const torch::Device& device, int64_t length, torch::ScalarType dtype,
                           const std::function<torch::Tensor()>& build) {
    if (!table_.defined() || device_ != device || length_ != length || dtype_ != dtype) {
      table_ = build();
      device_ = device;
      length_ = length;
      dtype_ = dtype;
    }
    return table_;
  }

 private:
  torch::Tensor table_;
  torch::Device device_{torch::kCPU};
  int64_t length_ = -1;
  torch::ScalarType dtype_ = torch::kFloat;
};

}  // namespace roformer::model
