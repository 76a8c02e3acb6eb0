// The GPU engine, LibTorch's own c10d::ProcessGroupNCCL: the engine under torchrun, DDP and
// torchtitan, with its watchdog and heartbeat monitor, timeouts,
// cross-rank error propagation and flight recorder, configured by the TORCH_NCCL_* variables
// users already know. Two defaults are set here unless the environment sets them: a blocking
// wait (TORCH_NCCL_BLOCKING_WAIT=1), so a dead or hung peer surfaces in the waiting rank as an
// error that names the operation (exit 2, like the other engines) instead of the watchdog
// aborting the process; and a flight recorder of the last 2000 collectives dumped on a
// timeout (TORCH_NCCL_TRACE_BUFFER_SIZE, TORCH_NCCL_DUMP_ON_TIMEOUT; docs/distributed.md).
// The communicator is nonblocking, created eagerly on this rank's GPU and waited for with one
// barrier, so a peer that never joins fails the start within dist.timeout_s.
#include "roformer/common/errors.h"
#include "roformer/distributed/communicator.h"

#if defined(ROFORMER_HAVE_NCCL) && defined(ROFORMER_WITH_CUDA) && defined(USE_C10D_NCCL)
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "roformer/distributed/backend_communicator.h"

namespace roformer::dist {
namespace {

constexpr const char* kEngine = "NCCL";

// Our defaults for c10d's switches; a value already in the environment wins. A nonblocking
// communicator bounds its init by TORCH_NCCL_NONBLOCKING_TIMEOUT (c10d's default: 30 minutes).
void default_environment(std::chrono::milliseconds timeout) {
  ::setenv("TORCH_NCCL_BLOCKING_WAIT", "1", /*overwrite=*/0);
  ::setenv("TORCH_NCCL_USE_COMM_NONBLOCKING", "1", 0);
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(timeout).count();
  ::setenv("TORCH_NCCL_NONBLOCKING_TIMEOUT", std::to_string(std::max<int64_t>(1, seconds)).c_str(), 0);
  ::setenv("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000", 0);
  ::setenv("TORCH_NCCL_DUMP_ON_TIMEOUT", "1", 0);
}

class NcclCommunicator : public BackendCommunicator {
 public:
  NcclCommunicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, int device,
                   std::chrono::milliseconds timeout)
      : BackendCommunicator(kEngine, "nccl", rank, size), device_(device) {
    default_environment(timeout);
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    group_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(c10::make_intrusive<c10d::PrefixStore>("c10d_nccl", store),
                                                         rank, size, options);
    backend_ = group_;
    try {
      group_->eagerConnectSingleDevice(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device)));
      // A nonblocking communicator finishes its init only when first used: one barrier waits for
      // every peer (up to dist.timeout_s), so a peer that never joins fails the start.
      group_->barrier(barrier_options())->wait();
    } catch (const std::exception& e) {
      try {
        group_->abort();  // its communicator is half made: no orderly shutdown later
      } catch (...) {
      }
      rethrow_collective_failure(kEngine, "communicator init", e);
    }
  }
  ~NcclCommunicator() override {
    try {
      group_->shutdown();  // c10d's orderly teardown: its watchdog stops before the communicator goes
    } catch (...) {        // a failed peer may leave nothing to shut down cleanly
    }
  }

 protected:
  c10d::BarrierOptions barrier_options() const override {
    c10d::BarrierOptions options;
    options.device_ids = {static_cast<int64_t>(device_)};
    return options;
  }

 private:
  int device_;
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> group_;
};

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
  throw UserError(
      "this build has no NCCL (it needs LibTorch's CUDA build, with c10d's ProcessGroupNCCL); train on the CPU "
      "with dist.backend=gloo, or build against a CUDA LibTorch (scripts/setup.sh)");
}

}  // namespace roformer::dist

#endif
