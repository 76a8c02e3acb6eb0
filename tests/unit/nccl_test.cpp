// The NCCL engine (LibTorch's c10d::ProcessGroupNCCL) with one rank (a single GPU cannot host
// two NCCL ranks): init through the c10d store, all-reduce and
// broadcast values, ordering after work queued on the compute stream (no host synchronisation
// in between), the reducer on CUDA tensors, and the abort path: a peer that never joins makes
// init fail within the timeout instead of hanging. Skips cleanly without NCCL or without a GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>

#include "roformer/distributed/communicator.h"
#include "roformer/distributed/reducer.h"

namespace nccl_test {

using namespace roformer::dist;

namespace {

c10::intrusive_ptr<c10d::Store> local_store(int workers, bool wait) {
  c10d::TCPStoreOptions o;
  o.port = 0;  // any free port
  o.isServer = true;
  o.numWorkers = wait ? std::optional<size_t>(static_cast<size_t>(workers)) : std::nullopt;
  o.waitWorkers = wait;
  o.timeout = std::chrono::seconds(10);
  return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", o);
}

bool skip_reason(std::string* why) {
  if (!nccl_available()) {
    *why = "built without NCCL (LibTorch's CUDA build with c10d's ProcessGroupNCCL)";
    return true;
  }
  if (!torch::cuda::is_available()) {
    *why = "no CUDA GPU visible";
    return true;
  }
  return false;
}

void all_reduce_broadcast_and_stream_ordering() {
  auto comm = make_nccl_communicator(local_store(1, true), 0, 1, 0, std::chrono::seconds(30));
  EXPECT_EQ(comm->name(), "nccl");
  // Queued on the compute stream and immediately reduced: the NCCL stream must wait for it.
  torch::Tensor a = torch::arange(1 << 22, torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA));
  torch::Tensor b = (a * 2).contiguous();
  comm->allreduce_sum(b)->wait();
  EXPECT_TRUE(torch::equal(b.cpu(), (a * 2).cpu()));
  torch::Tensor c = torch::full({7}, 3.0, torch::TensorOptions().dtype(torch::kFloat64).device(torch::kCUDA));
  comm->broadcast(c, 0);
  EXPECT_TRUE(torch::equal(c.cpu(), torch::full({7}, 3.0, torch::kFloat64)));
  comm->barrier();
}

void reducer_matches_plain_backward() {
  auto comm = make_nccl_communicator(local_store(1, true), 0, 1, 0, std::chrono::seconds(30));
  torch::manual_seed(3);
  torch::nn::Linear lin(16, 4);
  lin->to(torch::kCUDA);
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (auto& p : lin->named_parameters()) named.emplace_back(p.key(), p.value());
  GradientReducer reducer(named, *comm, ReducerOptions{0, 0, false});
  const torch::Tensor x = torch::randn({8, 16}, torch::kCUDA);
  lin->zero_grad();
  lin->forward(x).pow(2).sum().backward();
  std::vector<torch::Tensor> plain;
  for (auto& p : lin->parameters()) plain.push_back(p.grad().clone());
  lin->zero_grad();
  reducer.prepare_for_backward();
  lin->forward(x).pow(2).sum().backward();
  reducer.finish();
  auto params = lin->parameters();
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(torch::allclose(params[i].grad(), plain[i]));
  EXPECT_EQ(reducer.collectives_launched(), 2);
}

// Returns the error's message ("" when init succeeded, which fails the test).
std::string init_error_with_a_missing_peer() {
  const auto t0 = std::chrono::steady_clock::now();
  std::string message;
  try {
    make_nccl_communicator(local_store(2, false), 0, 2, 0, std::chrono::seconds(3));
    ADD_FAILURE() << "init with a missing peer succeeded";
  } catch (const std::exception& e) {
    message = e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
  return message;
}

}  // namespace

TEST(Nccl, OneRankAllReduceBroadcastAndStreamOrdering) {
  std::string why;
  if (skip_reason(&why)) GTEST_SKIP() << why;
  all_reduce_broadcast_and_stream_ordering();
}

TEST(Nccl, ReducerOnCudaTensorsMatchesPlainBackward) {
  std::string why;
  if (skip_reason(&why)) GTEST_SKIP() << why;
  reducer_matches_plain_backward();
}

TEST(Nccl, PeerThatNeverJoinsFailsInitWithinTheTimeout) {
  std::string why;
  if (skip_reason(&why)) GTEST_SKIP() << why;
  const std::string message = init_error_with_a_missing_peer();
  EXPECT_NE(message.find("NCCL communicator init failed"), std::string::npos) << message;
}

}  // namespace nccl_test
