// A position table kept on the device it is used on, rebuilt only when the device, the
// sequence length or the dtype changes (training: built once; evaluation: once per length).
// Tables depend on configuration only, never on learned weights, so caching is exact. A table
// of query rows [begin, end) (long lengths, attention in blocks) is keyed by its rows as well.
#pragma once

#include <torch/types.h>

#include <functional>

namespace roformer::model {

class TableCache {
 public:
  // The cached table for (device, length, dtype, rows), built by `build()` on a miss.
  const torch::Tensor& get(const torch::Device& device, int64_t length, torch::ScalarType dtype,
                           const std::function<torch::Tensor()>& build, int64_t rows_begin = 0, int64_t rows_end = -1) {
    if (!table_.defined() || device_ != device || length_ != length || dtype_ != dtype || begin_ != rows_begin ||
        end_ != rows_end) {
      table_ = build();
      device_ = device;
      length_ = length;
      dtype_ = dtype;
      begin_ = rows_begin;
      end_ = rows_end;
    }
    return table_;
  }

 private:
  torch::Tensor table_;
  torch::Device device_{torch::kCPU};
  int64_t length_ = -1;
  torch::ScalarType dtype_ = torch::kFloat;
  int64_t begin_ = 0, end_ = -1;
};

}  // namespace roformer::model
