// The CPU engine: LibTorch's c10d ProcessGroupGloo. The PyPI LibTorch exports the Gloo
// backend but ships no <gloo/...> headers, so Debian's libgloo-dev provides them; we only
// hold Gloo objects through shared_ptr, so its header version does not change any layout we
// use (the library code is LibTorch's own copy of Gloo).
#ifndef USE_C10D_GLOO  // LibTorch's CMake usually defines it already
#define USE_C10D_GLOO 1
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "roformer/common/errors.h"
#include "roformer/distributed/backend_communicator.h"

namespace roformer::dist {
namespace {

class GlooCommunicator : public BackendCommunicator {
 public:
  GlooCommunicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, const std::string& host,
                   std::chrono::milliseconds timeout)
      : BackendCommunicator("Gloo", "gloo", rank, size) {
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices.push_back(host.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                                            : c10d::ProcessGroupGloo::createDeviceForHostname(host));
    options->threads = 1;
    backend_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
  }
};

}  // namespace

std::unique_ptr<Communicator> make_gloo_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                     const std::string& host, std::chrono::milliseconds timeout) {
  return std::make_unique<GlooCommunicator>(store, rank, size, host, timeout);
}

}  // namespace roformer::dist
