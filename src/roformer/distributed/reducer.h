// The data-parallel gradient reducer (PyTorch DDP's design, reduced to what we use).
// Parameters go into flat buckets in reverse registration order (gradients of the last
// layers arrive first), the first bucket capped at `first_bucket_bytes`, the others at
// `bucket_bytes`, split by (dtype, device). A hook after each parameter's gradient
// accumulation copies grad/world into its bucket; when a bucket is full its all-reduce (SUM)
// is launched at once, strictly in bucket order, so communication overlaps the rest of
// backward. finish() waits and copies the averaged gradients back. Parameters that do not
// require grad (frozen) are left out.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "roformer/distributed/communicator.h"

namespace torch::autograd {
struct Node;
}

namespace roformer::dist {

struct BucketParam {
  int64_t bytes = 0;
  std::string group;  // parameters of different groups (dtype/device) never share a bucket
};

// Bucket assignment: indices into `params`, buckets in launch order. A cap <= 0 puts every
// parameter in a bucket of its own.
std::vector<std::vector<size_t>> assign_buckets(const std::vector<BucketParam>& params, int64_t first_bucket_bytes,
                                                int64_t bucket_bytes);

struct ReducerOptions {
  int64_t first_bucket_bytes = 1 << 20;
  int64_t bucket_bytes = 25 << 20;
  bool find_unused_parameters = false;  // false: a parameter without gradient is an error naming it
};

// One event in the reducer's life, for tests of overlap and order.
struct ReducerEvent {
  enum Kind { hook, launch } kind;
  size_t index;  // parameter index (hook) or bucket index (launch)
};

class GradientReducer {
 public:
  GradientReducer(std::vector<std::pair<std::string, at::Tensor>> named_params, Communicator& comm,
                  ReducerOptions options = {});
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Call before a backward whose gradients should be synchronised (not under no_sync).
  void prepare_for_backward();
  // Call after that backward: launches what is left, waits, writes averaged gradients.
  void finish();

  // While alive, backward passes accumulate locally (gradient accumulation micro-steps).
  class NoSync {
   public:
    explicit NoSync(GradientReducer& r) : r_(r), was_(r.sync_enabled_) { r_.sync_enabled_ = false; }
    ~NoSync() { r_.sync_enabled_ = was_; }

   private:
    GradientReducer& r_;
    bool was_;
  };
  NoSync no_sync() { return NoSync(*this); }
  bool sync_enabled() const { return sync_enabled_; }

  const std::vector<std::vector<size_t>>& buckets() const { return bucket_params_; }
  int64_t collectives_launched() const { return collectives_; }
  // Records hook/launch events (off by default: tests of overlap and order turn it on).
  void record_events(bool on);
  std::vector<ReducerEvent> events() const;

 private:
  void on_gradient(size_t index);
  void launch_ready_buckets();  // mutex held

  struct Bucket {
    at::Tensor flat;
    std::vector<at::Tensor> views;  // per parameter, shaped like it
    size_t pending = 0;
    bool launched = false;
    std::unique_ptr<CollectiveHandle> handle;
  };

  std::vector<std::pair<std::string, at::Tensor>> params_;
  Communicator& comm_;
  ReducerOptions options_;
  std::vector<std::vector<size_t>> bucket_params_;
  std::vector<std::pair<size_t, size_t>> where_;  // parameter -> (bucket, slot)
  std::vector<Bucket> buckets_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;  // kept alive: autograd holds weak refs
  std::vector<uintptr_t> hook_keys_;
  std::vector<bool> ready_;
  size_t next_bucket_ = 0;
  bool expect_hooks_ = false;
  bool sync_enabled_ = true;
  int64_t collectives_ = 0;
  mutable std::mutex mutex_;
  bool record_events_ = false;
  std::vector<ReducerEvent> events_;
};

}  // namespace roformer::dist
