// A Communicator over one of LibTorch's c10d backends (ProcessGroupGloo on the CPU,
// ProcessGroupNCCL on CUDA): the collectives, their waits, and a failure reported through
// rethrow_collective_failure with the engine's name and the operation, written once for both
// engines (gloo_communicator.cpp and nccl_communicator.cpp make the backend).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <string>
#include <utility>
#include <vector>

#include "roformer/distributed/communicator.h"

namespace roformer::dist {

class BackendCommunicator : public Communicator {
 public:
  BackendCommunicator(const char* engine, std::string name, int rank, int size)
      : engine_(engine), name_(std::move(name)), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_; }

  std::unique_ptr<CollectiveHandle> allreduce_sum(at::Tensor& tensor) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    return std::make_unique<Handle>(backend_->allreduce(tensors, options), engine_);
  }
  void broadcast(at::Tensor& tensor, int root) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    run("broadcast", [&] { return backend_->broadcast(tensors, options); });
  }
  void barrier() override {
    run("barrier", [&] { return backend_->barrier(barrier_options()); });
  }

 protected:
  // NCCL names the device its barrier runs on; Gloo needs nothing.
  virtual c10d::BarrierOptions barrier_options() const { return {}; }
  template <typename Launch>
  void run(const char* op, Launch&& launch) {
    try {
      launch()->wait();
    } catch (const std::exception& e) {
      rethrow_collective_failure(engine_, op, e);
    }
  }
  c10::intrusive_ptr<c10d::Backend> backend_;  // set by the engine's constructor

 private:
  class Handle : public CollectiveHandle {
   public:
    Handle(c10::intrusive_ptr<c10d::Work> work, const char* engine) : work_(std::move(work)), engine_(engine) {}
    void wait() override {
      try {
        work_->wait();
      } catch (const std::exception& e) {
        rethrow_collective_failure(engine_, "allreduce", e);
      }
    }

   private:
    c10::intrusive_ptr<c10d::Work> work_;
    const char* engine_;
  };
  const char* engine_;
  std::string name_;
  int rank_, size_;
};

}  // namespace roformer::dist
