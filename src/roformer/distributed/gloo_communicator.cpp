// The CPU engine: LibTorch's c10d ProcessGroupGloo. The PyPI LibTorch exports the Gloo
// backend but ships no <gloo/...> headers, so Debian's libgloo-dev provides them; we only
// hold Gloo objects through shared_ptr, so its header version does not change any layout we
// use (the library code is LibTorch's own copy of Gloo).
#ifndef USE_C10D_GLOO  // LibTorch's CMake usually defines it already
#define USE_C10D_GLOO 1
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "roformer/common/errors.h"
#include "roformer/distributed/communicator.h"

namespace roformer::dist {
namespace {

class GlooHandle : public CollectiveHandle {
 public:
  explicit GlooHandle(c10::intrusive_ptr<c10d::Work> work) : work_(std::move(work)) {}
  void wait() override {
    try {
      work_->wait();
    } catch (const std::exception& e) {
      rethrow_collective_failure("Gloo", "allreduce", e);
    }
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
};

class GlooCommunicator : public Communicator {
 public:
  GlooCommunicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, const std::string& host,
                   std::chrono::milliseconds timeout)
      : rank_(rank), size_(size) {
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices.push_back(host.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                                            : c10d::ProcessGroupGloo::createDeviceForHostname(host));
    options->threads = 1;
    group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "gloo"; }

  std::unique_ptr<CollectiveHandle> allreduce_sum(at::Tensor& tensor) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    return std::make_unique<GlooHandle>(group_->allreduce(tensors, options));
  }
  void broadcast(at::Tensor& tensor, int root) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    try {
      group_->broadcast(tensors, options)->wait();
    } catch (const std::exception& e) {
      rethrow_collective_failure("Gloo", "broadcast", e);
    }
  }
  void barrier() override {
    try {
      group_->barrier()->wait();
    } catch (const std::exception& e) {
      rethrow_collective_failure("Gloo", "barrier", e);
    }
  }

 private:
  int rank_, size_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
};

}  // namespace

std::unique_ptr<Communicator> make_gloo_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                     const std::string& host, std::chrono::milliseconds timeout) {
  return std::make_unique<GlooCommunicator>(store, rank, size, host, timeout);
}

}  // namespace roformer::dist
