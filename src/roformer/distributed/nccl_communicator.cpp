// The GPU engine: NCCL on a stream of its own. Every collective waits (on the GPU) for the
// compute stream's work queued so far, runs on the NCCL stream, and records a completion
// event. A watchdog thread polls ncclCommGetAsyncError and the events of pending operations;
// on an asynchronous error or a deadline it calls ncclCommAbort, which releases the GPU, and
// the next wait() throws naming the operation. NCCL itself has no timeout: without the
// watchdog a dead peer is a hang. Unique id exchange and init go through the c10d store
// (non-blocking init, so init is bounded by the timeout too). A collective the nonblocking
// communicator answers with ncclInProgress is polled until it is on the stream before its
// completion event is recorded (poll_in_progress.h).
#include "roformer/distributed/communicator.h"

#include "roformer/common/errors.h"
#include "roformer/distributed/poll_in_progress.h"

#if defined(ROFORMER_HAVE_NCCL) && defined(ROFORMER_WITH_CUDA)
#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace roformer::dist {
namespace {

using Clock = std::chrono::steady_clock;

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

ncclDataType_t nccl_type(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return ncclFloat32;
    case at::kDouble:
      return ncclFloat64;
    case at::kHalf:
      return ncclFloat16;
    case at::kBFloat16:
      return ncclBfloat16;
    case at::kLong:
      return ncclInt64;
    case at::kInt:
      return ncclInt32;
    default:
      throw std::runtime_error(std::string("NCCL: unsupported dtype ") + c10::toString(t));
  }
}

// One enqueued collective. The completion event lives as long as the op (shared by the
// handle and the watchdog's queue), so wait() may still order the compute stream on it.
struct PendingOp {
  uint64_t seq = 0;
  std::string what;
  cudaEvent_t done = nullptr;
  Clock::time_point start;
  std::atomic<bool> finished{false};
  ~PendingOp() {
    if (done) cudaEventDestroy(done);
  }
};

class NcclCommunicator;

class NcclHandle : public CollectiveHandle {
 public:
  NcclHandle(NcclCommunicator* owner, std::shared_ptr<PendingOp> op) : owner_(owner), op_(std::move(op)) {}
  void wait() override;

 private:
  NcclCommunicator* owner_;
  std::shared_ptr<PendingOp> op_;
};

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, int device,
                   std::chrono::milliseconds timeout)
      : rank_(rank),
        size_(size),
        device_(device),
        timeout_(timeout),
        stream_(c10::cuda::getStreamFromPool(/*isHighPriority=*/true, static_cast<c10::DeviceIndex>(device))) {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
    ncclUniqueId id;
    const std::string key = "roformer/nccl_unique_id";
    if (rank == 0) {
      if (ncclGetUniqueId(&id) != ncclSuccess) throw std::runtime_error("ncclGetUniqueId failed");
      const auto* b = reinterpret_cast<const uint8_t*>(&id);
      store->set(key, std::vector<uint8_t>(b, b + sizeof(id)));
    } else {
      const std::vector<uint8_t> bytes = store->get(key);
      if (bytes.size() != sizeof(id)) throw std::runtime_error("NCCL unique id from the store has the wrong size");
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&comm_, size, id, rank, &config);
    if (r == ncclSuccess || r == ncclInProgress) r = async_state();  // init goes on in the background
    r = poll_in_progress(
        r, ncclInProgress, [&] { return async_state(); }, Clock::now() + timeout,
        [&]() -> ncclResult_t {
          ncclCommAbort(comm_);
          throw std::runtime_error("NCCL init timed out after " + std::to_string(timeout.count()) + " ms on rank " +
                                   std::to_string(rank) + " (a peer never joined?)");
        },
        std::chrono::milliseconds(1));
    if (r != ncclSuccess)
      throw std::runtime_error(std::string("NCCL init failed on rank ") + std::to_string(rank) + ": " +
                               ncclGetErrorString(r));
    watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    // Abort, not destroy: destroy can block on pending work of a dead peer.
    if (comm_) ncclCommAbort(comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "nccl"; }

  std::unique_ptr<CollectiveHandle> allreduce_sum(at::Tensor& t) override {
    check_tensor(t);
    auto op = enqueue("allreduce of " + std::to_string(t.numel()) + " elements", [&](cudaStream_t s) {
      return ncclAllReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), nccl_type(t.scalar_type()),
                           ncclSum, comm_, s);
    });
    c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), stream_);
    return std::make_unique<NcclHandle>(this, op);
  }
  void broadcast(at::Tensor& t, int root) override {
    check_tensor(t);
    auto op = enqueue("broadcast from rank " + std::to_string(root), [&](cudaStream_t s) {
      return ncclBroadcast(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), nccl_type(t.scalar_type()), root,
                           comm_, s);
    });
    NcclHandle(this, op).wait();
  }
  void barrier() override {
    at::Tensor one = at::ones({1}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, device_));
    allreduce_sum(one)->wait();
    check_cuda(cudaStreamSynchronize(c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_))),
               "barrier");
  }

  // Blocks the host until the op completed; throws if the watchdog aborted the communicator.
  void wait_for(const std::shared_ptr<PendingOp>& op) {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [&] { return op->finished.load() || !error_.empty(); });
    if (!error_.empty()) rethrow_collective_failure("NCCL", "collective", std::runtime_error(error_));
    // The compute stream continues after the collective.
    check_cuda(
        cudaStreamWaitEvent(c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_)), op->done, 0),
        "cudaStreamWaitEvent");
  }

 private:
  void check_tensor(const at::Tensor& t) const {
    if (!t.is_cuda() || !t.is_contiguous()) throw std::runtime_error("NCCL communicator needs contiguous CUDA tensors");
  }

  template <class Launch>
  std::shared_ptr<PendingOp> enqueue(const std::string& what, Launch launch) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_.empty()) throw std::runtime_error(error_);
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    auto op = std::make_shared<PendingOp>();
    op->seq = ++seq_;
    op->what = what;
    op->start = Clock::now();
    cudaEvent_t ready;
    check_cuda(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventRecord(ready, c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_))),
               "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(stream_.stream(), ready, 0), "cudaStreamWaitEvent");
    cudaEventDestroy(ready);
    // In progress: accepted but maybe not yet on the stream; the completion event must follow it.
    const ncclResult_t r = poll_in_progress(
        launch(stream_.stream()), ncclInProgress, [&] { return async_state(); }, op->start + timeout_,
        [&]() -> ncclResult_t {
          abort_locked("operation #" + std::to_string(op->seq) + " (" + what + ") was not enqueued within " +
                       std::to_string(timeout_.count()) + " ms (a peer died or stalled)");
          throw std::runtime_error(error_);
        });
    if (r != ncclSuccess) throw std::runtime_error("NCCL " + what + " failed: " + ncclGetErrorString(r));
    check_cuda(cudaEventCreateWithFlags(&op->done, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventRecord(op->done, stream_.stream()), "cudaEventRecord");
    pending_.push_back(op);
    wake_.notify_all();
    return op;
  }

  // Polls pending operations; aborts the communicator on an async error or a deadline.
  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopping_) {
      wake_.wait_for(lock, std::chrono::milliseconds(pending_.empty() ? 100 : 1));
      while (!pending_.empty() && cudaEventQuery(pending_.front()->done) == cudaSuccess) {
        pending_.front()->finished = true;
        pending_.pop_front();
        wake_.notify_all();
      }
      if (pending_.empty() || !error_.empty()) continue;
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      const auto& op = *pending_.front();
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - op.start);
      if ((async != ncclSuccess && async != ncclInProgress) || waited > timeout_)
        abort_locked("operation #" + std::to_string(op.seq) + " (" + op.what + ") " +
                     (async != ncclSuccess && async != ncclInProgress
                          ? std::string("failed: ") + ncclGetErrorString(async)
                          : "timed out after " + std::to_string(waited.count()) + " ms (a peer died or stalled)"));
    }
  }

  // The communicator's asynchronous state: init or an enqueue in progress, success, or an error.
  ncclResult_t async_state() {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
    return r == ncclSuccess ? state : r;
  }

  // Records why, aborts the communicator (releasing the GPU) and wakes every waiter; mutex_ held.
  void abort_locked(const std::string& why) {
    error_ = "NCCL watchdog on rank " + std::to_string(rank_) + ": " + why + "; communicator aborted";
    ncclCommAbort(comm_);
    comm_ = nullptr;
    wake_.notify_all();
  }

  int rank_, size_, device_;
  std::chrono::milliseconds timeout_;
  c10::cuda::CUDAStream stream_;
  ncclComm_t comm_ = nullptr;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<PendingOp>> pending_;
  std::string error_;
  uint64_t seq_ = 0;
  bool stopping_ = false;
  std::thread watchdog_;
};

void NcclHandle::wait() {
  owner_->wait_for(op_);
}

}  // namespace

bool nccl_available() {
  return true;
}

std::unique_ptr<Communicator> make_nccl_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                     int device, std::chrono::milliseconds timeout) {
  return std::make_unique<NcclCommunicator>(store, rank, size, device, timeout);
}

}  // namespace roformer::dist

#else

namespace roformer::dist {

bool nccl_available() {
  return false;
}

std::unique_ptr<Communicator> make_nccl_communicator(const c10::intrusive_ptr<c10d::Store>&, int, int, int,
                                                     std::chrono::milliseconds) {
  throw UserError("this build has no NCCL (configure with CUDA and the nvidia-nccl wheel); use dist.backend=gloo");
}

}  // namespace roformer::dist

#endif
