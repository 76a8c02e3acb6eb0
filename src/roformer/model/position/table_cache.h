// A position table kept on the device it is used on, rebuilt only when the device, the
// sequence length or the dtype changes (training: built once; evaluation: once per length).
// Tables depend on configuration only, never on learned weights, so caching is exact. A table
// of query rows [begin, end) (long lengths, attention in blocks) is keyed by its rows as well.
// A cache holds one table, so evaluating many lengths or blocks keeps memory bounded, until a
// CUDA graph is captured (keep_every_table): from then on each cache keeps one table per key.
#pragma once

#include <torch/types.h>

#include <deque>
#include <functional>

namespace roformer::model {

class TableCache {
 public:
  // The cached table for (device, length, dtype, rows), built by `build()` on a miss.
  torch::Tensor get(const torch::Device& device, int64_t length, torch::ScalarType dtype,
                    const std::function<torch::Tensor()>& build, int64_t rows_begin = 0, int64_t rows_end = -1);

  // A captured CUDA graph reads its tables by address, so every table alive at its capture
  // must outlive it: once `keep` is set (the CUDA-graph step sets it before capturing), no
  // cache in the process drops a table again; a table of another key (an fp32 validation pass
  // after bf16 training builds xPos's scales in fp32) is kept beside it. Tests reset it.
  static void keep_every_table(bool keep);
  static bool keeps_every_table();

  size_t size() const { return entries_.size(); }

 private:
  struct Key {
    torch::Device device{torch::kCPU};
    int64_t length = -1;
    torch::ScalarType dtype = torch::kFloat;
    int64_t begin = 0, end = -1;
    bool operator==(const Key& o) const {
      return device == o.device && length == o.length && dtype == o.dtype && begin == o.begin && end == o.end;
    }
  };
  struct Entry {
    Key key;
    torch::Tensor table;
  };
  std::deque<Entry> entries_;  // one, or one per key once tables are kept
};

}  // namespace roformer::model
