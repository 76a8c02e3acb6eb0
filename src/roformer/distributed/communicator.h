// Collective communication between the ranks of a data-parallel run. Two engines implement
// it, both LibTorch's c10d process groups: Gloo (ProcessGroupGloo, for CPU tensors) and NCCL
// (ProcessGroupNCCL, for CUDA tensors, with its watchdog, timeouts and flight recorder). Reductions are always
// SUM (Gloo has no AVG); callers pre-divide. All calls must be made in the same order on
// every rank.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace c10d {
class Store;
}

namespace roformer::dist {

// An asynchronous collective: wait() blocks until done (or throws on failure or timeout).
class CollectiveHandle {
 public:
  virtual ~CollectiveHandle() = default;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;
  // In-place sum over ranks of a contiguous tensor; returns at once.
  virtual std::unique_ptr<CollectiveHandle> allreduce_sum(at::Tensor& tensor) = 0;
  // In place: every rank receives `root`'s values. Blocks.
  virtual void broadcast(at::Tensor& tensor, int root) = 0;
  virtual void barrier() = 0;
  // Blocking sum, for scalars and small metrics.
  void allreduce_sum_now(at::Tensor& tensor) { allreduce_sum(tensor)->wait(); }
};

// Gloo over the given store; `host` is the address this rank's Gloo device binds to ("":
// the address this machine's hostname resolves to).
std::unique_ptr<Communicator> make_gloo_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                     const std::string& host, std::chrono::milliseconds timeout);

// NCCL on CUDA device `device` (c10d's ProcessGroupNCCL over the given store), its
// communicator made when this returns; throws UserError when this build's LibTorch has none.
std::unique_ptr<Communicator> make_nccl_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                     int device, std::chrono::milliseconds timeout);
bool nccl_available();

// Rethrows a failed collective: as a UserError (exit 2) when its message says another rank is
// gone (its process ended, its connection broke, or it stopped answering within dist.timeout_s),
// since nothing in this process is wrong and the run resumes from its last checkpoint; as it
// was otherwise.
[[noreturn]] void rethrow_collective_failure(const std::string& engine, const std::string& op, const std::exception& e);

}  // namespace roformer::dist
