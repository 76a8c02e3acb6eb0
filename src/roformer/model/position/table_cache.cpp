// TableCache (see table_cache.h): one table per cache, or one per key once a CUDA graph may
// read them.
#include "roformer/model/position/table_cache.h"

#include <atomic>

namespace roformer::model {
namespace {

std::atomic<bool>& keep_flag() {
  static std::atomic<bool> keep{false};
  return keep;
}

}  // namespace

void TableCache::keep_every_table(bool keep) {
  keep_flag().store(keep);
}

bool TableCache::keeps_every_table() {
  return keep_flag().load();
}

torch::Tensor TableCache::get(const torch::Device& device, int64_t length, torch::ScalarType dtype,
                              const std::function<torch::Tensor()>& build, int64_t rows_begin, int64_t rows_end) {
  const Key key{device, length, dtype, rows_begin, rows_end};
  for (const Entry& e : entries_)
    if (e.key == key) return e.table;
  torch::Tensor table = build();
  if (!keeps_every_table()) entries_.clear();  // the previous table goes before the next is kept
  entries_.push_back({key, table});
  return table;
}

}  // namespace roformer::model
