// Rendezvous, fingerprint check, barriers and the rank-0 broadcast (see process_group.h).
#include "roformer/distributed/process_group.h"

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <sstream>

#include "roformer/common/errors.h"
#include "roformer/common/strings.h"
#include "roformer/distributed/master_probe.h"

namespace roformer::dist {
namespace {

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

std::string as_string(const std::vector<uint8_t>& v) {
  return std::string(v.begin(), v.end());
}
std::vector<uint8_t> as_bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

}  // namespace

ProcessGroup::ProcessGroup(const DistEnv& env, const ProcessGroupOptions& options) : env_(env), options_(options) {
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(env.master_port);
  so.isServer = env.rank == 0 && !env.agent_store;
  so.numWorkers = static_cast<size_t>(env.world_size);
  so.waitWorkers = true;
  so.timeout = options.timeout;
  const std::string where = env.master_addr + ":" + std::to_string(env.master_port);
  probe_master(env, std::chrono::milliseconds(10000));
  try {
    // Our keys (and Gloo's/NCCL's) live under a prefix per launch attempt, so a restarted job
    // never reads what an earlier attempt left in torchrun's long-lived store.
    store_ = c10::make_intrusive<c10d::PrefixStore>("roformer/attempt_" + std::to_string(env.restart_count),
                                                    c10::make_intrusive<c10d::TCPStore>(env.master_addr, so));
  } catch (const std::exception& e) {
    // The environment, not our code: peers that never came, a port in use. One line, exit 2.
    const std::string what = e.what();
    throw UserError("rendezvous at MASTER_ADDR:MASTER_PORT=" + where + " failed on rank " + std::to_string(env.rank) +
                    " (waited up to " + std::to_string(options.timeout.count() / 1000) +
                    " s, dist.timeout_s): " + first_line(what) + "; are all " + std::to_string(env.world_size) +
                    " ranks started with the same MASTER_ADDR/MASTER_PORT, and is the port free on rank 0's host?");
  }
  store_->setTimeout(options.timeout);
  try {
    if (options.engine == Engine::nccl) {
      comm_ = make_nccl_communicator(store_, env.rank, env.world_size, options.cuda_device, options.timeout);
    } else {
      // Gloo binds to loopback on one node; across nodes, to the address this host's name resolves to.
      const std::string host = env.local_world_size == env.world_size ? "127.0.0.1" : "";
      comm_ = make_gloo_communicator(store_, env.rank, env.world_size, host, options.timeout);
    }
  } catch (const UserError&) {
    throw;
  } catch (const std::exception& e) {
    throw std::runtime_error("creating the " + std::string(options.engine == Engine::gloo ? "Gloo" : "NCCL") +
                             " communicator failed on rank " + std::to_string(env.rank) + ": " + e.what());
  }
}

ProcessGroup::~ProcessGroup() = default;

void ProcessGroup::check_same_fingerprint(const std::string& what, const std::string& fingerprint) {
  const std::string prefix = "roformer/fingerprint/" + what + "/";
  store_->set(prefix + std::to_string(rank()), as_bytes(fingerprint));
  std::vector<std::string> keys;
  for (int r = 0; r < size(); ++r) keys.push_back(prefix + std::to_string(r));
  store_->wait(keys, options_.timeout);
  const std::vector<std::string> reference = split_lines(as_string(store_->get(keys[0])));
  for (int r = 1; r < size(); ++r) {
    const std::vector<std::string> other = split_lines(as_string(store_->get(keys[static_cast<size_t>(r)])));
    if (other == reference) continue;
    size_t k = 0;
    while (k < other.size() && k < reference.size() && other[k] == reference[k]) ++k;
    const std::string mine = k < other.size() ? other[k] : "(nothing)";
    const std::string theirs = k < reference.size() ? reference[k] : "(nothing)";
    throw UserError("data parallel: rank " + std::to_string(r) + " has a different " + what + " than rank 0: rank " +
                    std::to_string(r) + " has '" + mine + "' where rank 0 has '" + theirs +
                    "'; every rank must run the same config and code");
  }
}

void rethrow_collective_failure(const std::string& engine, const std::string& op, const std::exception& e) {
  static const char* const kPeerGone[] = {"Connection reset by peer",
                                          "Connection closed by peer",
                                          "Broken pipe",
                                          "remote process exited",
                                          "network error",
                                          "Connection refused",
                                          "timed out",
                                          "Timed out",
                                          "Socket closed"};
  const std::string what = e.what();
  for (const char* marker : kPeerGone) {
    if (what.find(marker) == std::string::npos) continue;
    const std::string first_line = what.substr(0, what.find('\n'));
    throw UserError(engine + " " + op + " failed: another rank is gone (its process ended, its node or network " +
                    "went away, or it stopped answering within dist.timeout_s): " + first_line +
                    ". The launcher's report names the rank that ended first and how; fix that, then rerun with "
                    "--resume auto to continue from the last checkpoint");
  }
  if (dynamic_cast<const UserError*>(&e)) throw UserError(what);
  throw std::runtime_error(engine + " " + op + " failed: " + what);
}

void ProcessGroup::store_barrier(const std::string& name) {
  const std::string key = "roformer/barrier/" + name + "/" + std::to_string(barrier_count_++);
  if (store_->add(key, 1) == size()) store_->set(key + "/done", as_bytes("1"));
  try {
    store_->wait({key + "/done"}, options_.timeout);
  } catch (const std::exception& e) {
    throw std::runtime_error("barrier '" + name + "' timed out on rank " + std::to_string(rank()) + " after " +
                             std::to_string(options_.timeout.count() / 1000.0) + " s: a rank died or stalled (" +
                             e.what() + ")");
  }
}

std::string ProcessGroup::share_from_rank0(const std::string& key, const std::string& value) {
  const std::string k = "roformer/shared/" + key;
  if (rank() == 0) store_->set(k, as_bytes(value));
  return as_string(store_->get(k));
}

std::string model_fingerprint(const torch::nn::Module& module, const std::vector<std::string>& extra) {
  std::ostringstream out;
  for (const auto& p : module.named_parameters())
    out << "parameter " << p.key() << " " << p.value().sizes() << " " << p.value().scalar_type() << "\n";
  for (const auto& b : module.named_buffers())
    out << "buffer " << b.key() << " " << b.value().sizes() << " " << b.value().scalar_type() << "\n";
  for (const auto& e : extra) out << e << "\n";
  return out.str();
}

void broadcast_module(Communicator& comm, torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  auto send = [&](torch::Tensor t) {
    if (t.is_contiguous()) {
      comm.broadcast(t, 0);
    } else {
      at::Tensor c = t.contiguous();
      comm.broadcast(c, 0);
      t.copy_(c);
    }
  };
  for (auto& p : module.parameters()) send(p);
  for (auto& b : module.buffers()) send(b);
}

}  // namespace roformer::dist
