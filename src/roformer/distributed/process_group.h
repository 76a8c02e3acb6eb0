// A data-parallel process group: the rendezvous store (c10d TCPStore hosted by rank 0), the
// communicator (Gloo for CPU, NCCL for CUDA), and the checks that must pass before any
// gradient collective: every rank has the same model fingerprint (parameter names, shapes,
// dtypes, world size). Also the rank-0 broadcast of parameters and buffers, and barriers.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "roformer/distributed/communicator.h"
#include "roformer/distributed/dist_env.h"

namespace torch::nn {
class Module;
}

namespace roformer::dist {

enum class Engine { gloo, nccl };
inline const char* engine_name(Engine e) {
  return e == Engine::gloo ? "Gloo" : "NCCL";
}

struct ProcessGroupOptions {
  Engine engine = Engine::gloo;
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
  int cuda_device = 0;  // NCCL: this rank's GPU (LOCAL_RANK)
};

class ProcessGroup {
 public:
  // Rendezvous of env.world_size ranks at env.master_addr:master_port; throws a
  // std::runtime_error naming the rendezvous when a rank does not arrive within the timeout.
  ProcessGroup(const DistEnv& env, const ProcessGroupOptions& options);
  ~ProcessGroup();

  int rank() const { return env_.rank; }
  int size() const { return env_.world_size; }
  const DistEnv& env() const { return env_; }
  Communicator& comm() { return *comm_; }
  std::chrono::milliseconds timeout() const { return options_.timeout; }

  // Every rank publishes `fingerprint` (one item per line); every rank compares all of them
  // with rank 0's and throws UserError naming the first differing rank and line.
  void check_same_fingerprint(const std::string& what, const std::string& fingerprint);

  // Barrier through the store (no collective engine involved), bounded by the timeout.
  void store_barrier(const std::string& name);

  // Rank 0's value of a small string (e.g. the resume checkpoint), via the store.
  std::string share_from_rank0(const std::string& key, const std::string& value);

 private:
  DistEnv env_;
  ProcessGroupOptions options_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::unique_ptr<Communicator> comm_;
  int64_t barrier_count_ = 0;
};

// "name shape dtype" per parameter and buffer, plus extra lines.
std::string model_fingerprint(const torch::nn::Module& module, const std::vector<std::string>& extra = {});

// Copies rank 0's parameters and buffers to every rank.
void broadcast_module(Communicator& comm, torch::nn::Module& module);

}  // namespace roformer::dist
