// The pure parts of data parallel: the distributed environment (torchrun and Slurm variables,
// every bad value named), bucket assignment (reverse order, first-bucket cap, groups, huge
// tensors, one per parameter), and the distributed sampler (PyTorch's semantics: equal
// shards, disjoint and covering, padding and drop_last, epochs, identical on every rank).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <set>

#include "roformer/common/errors.h"
#include "roformer/data/distributed_sampler.h"
#include "roformer/distributed/dist_env.h"
#include "roformer/distributed/master_probe.h"
#include "roformer/distributed/reducer.h"
#include "roformer/run/device_setup.h"

namespace dist_test {

using roformer::UserError;
using namespace roformer::dist;
using roformer::data::DistributedSampler;

namespace {

DistEnv env_of(const std::map<std::string, std::string>& vars) {
  return read_dist_env([&](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

std::string error_of(const std::map<std::string, std::string>& vars) {
  try {
    env_of(vars);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(DistEnv, UnsetIsASingleProcess) {
  const DistEnv e = env_of({});
  EXPECT_FALSE(e.distributed());
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.world_size, 1);
}

TEST(DistEnv, ReadsTorchrunVariables) {
  const DistEnv e = env_of({{"RANK", "5"},
                            {"WORLD_SIZE", "16"},
                            {"LOCAL_RANK", "5"},
                            {"LOCAL_WORLD_SIZE", "8"},
                            {"MASTER_ADDR", "node0"},
                            {"MASTER_PORT", "29400"}});
  EXPECT_TRUE(e.distributed());
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 16);
  EXPECT_EQ(e.local_rank, 5);
  EXPECT_EQ(e.local_world_size, 8);
  EXPECT_EQ(e.master_addr, "node0");
  EXPECT_EQ(e.master_port, 29400);
  EXPECT_EQ(e.source, "torchrun variables");
}

TEST(DistEnv, UnderTorchrunTheAgentHostsTheStore) {
  EXPECT_FALSE(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}}).agent_store);
  const DistEnv e = env_of({{"RANK", "0"},
                            {"WORLD_SIZE", "2"},
                            {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                            {"TORCHELASTIC_RESTART_COUNT", "3"}});
  EXPECT_TRUE(e.agent_store);
  EXPECT_EQ(e.restart_count, 3);
}

TEST(DistEnv, ReadsSlurmVariablesWhenTorchrunsAreAbsent) {
  const DistEnv e = env_of({{"SLURM_PROCID", "9"},
                            {"SLURM_NTASKS", "16"},
                            {"SLURM_LOCALID", "1"},
                            {"SLURM_NTASKS_PER_NODE", "8(x2)"},
                            {"MASTER_ADDR", "node0"}});
  EXPECT_EQ(e.rank, 9);
  EXPECT_EQ(e.world_size, 16);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 8);
  EXPECT_EQ(e.source, "Slurm variables");
}

TEST(DistEnv, HandSetRankThatDisagreesWithSlurmIsRefused) {
  const std::map<std::string, std::string> slurm{{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}};
  auto with = [&](std::map<std::string, std::string> extra) {
    extra.insert(slurm.begin(), slurm.end());
    return extra;
  };
  EXPECT_NE(error_of(with({{"RANK", "0"}, {"WORLD_SIZE", "4"}})).find("RANK=0 WORLD_SIZE=4 disagree with Slurm's"),
            std::string::npos);
  EXPECT_NE(error_of(with({{"RANK", "1"}, {"WORLD_SIZE", "2"}})).find("SLURM_NTASKS=4"), std::string::npos);
  // The same values agree; a launcher (torchrun, launch.sh) runs several ranks per Slurm task.
  EXPECT_EQ(env_of(with({{"RANK", "1"}, {"WORLD_SIZE", "4"}})).rank, 1);
  EXPECT_EQ(env_of(with({{"RANK", "5"}, {"WORLD_SIZE", "16"}, {"GROUP_RANK", "0"}})).rank, 5);
  EXPECT_EQ(env_of(with({{"RANK", "5"}, {"WORLD_SIZE", "16"}, {"TORCHELASTIC_RUN_ID", "x"}})).world_size, 16);
}

std::string probe_error(const DistEnv& e) {
  try {
    probe_master(e, std::chrono::milliseconds(2000));
  } catch (const UserError& err) {
    return err.what();
  }
  return "";
}

TEST(MasterProbe, UnresolvableAddressFailsAtOnceNamingIt) {
  DistEnv e;
  e.world_size = 2;
  e.rank = 1;
  e.master_addr = "no-such-host.invalid";
  const std::string err = probe_error(e);
  EXPECT_NE(err.find("MASTER_ADDR=no-such-host.invalid"), std::string::npos) << err;
  EXPECT_NE(err.find("does not resolve"), std::string::npos) << err;
  e.rank = 0;  // rank 0 hosts the store, but its peers need the name too
  EXPECT_NE(probe_error(e).find("does not resolve"), std::string::npos);
}

TEST(MasterProbe, ARefusedConnectionIsAnAnswer) {
  DistEnv e;
  e.world_size = 2;
  e.rank = 1;
  e.master_addr = "127.0.0.1";
  e.master_port = 1;  // nothing listens: the host answers with a refusal (rank 0 not up yet)
  EXPECT_EQ(probe_error(e), "");
  e.world_size = 1;  // single process: nothing is probed
  e.master_addr = "no-such-host.invalid";
  EXPECT_EQ(probe_error(e), "");
}

TEST(DistEnv, BadValuesAreNamed) {
  EXPECT_NE(error_of({{"RANK", "x"}, {"WORLD_SIZE", "2"}}).find("RANK='x' is not an integer"), std::string::npos);
  EXPECT_NE(error_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("RANK=2 is out of range [0, 1]"), std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "0"}}).find("WORLD_SIZE=0 is out of range"), std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}}).find("WORLD_SIZE is unset but RANK is set"), std::string::npos);
  EXPECT_NE(error_of({{"WORLD_SIZE", "2"}}).find("RANK is unset but WORLD_SIZE is set"), std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}).find("MASTER_PORT=70000"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}})
                .find("MASTER_ADDR is unset for a multi-node run"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "3"}}).find("LOCAL_RANK=3"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", ""}}).find("MASTER_ADDR is empty"),
            std::string::npos);
}

TEST(Buckets, ReverseOrderWithASmallFirstBucket) {
  // Six 400 KiB parameters: the first bucket (1 MiB cap) closes after three, the rest share one.
  std::vector<BucketParam> p(6, BucketParam{400 << 10, "f32"});
  const auto b = assign_buckets(p, 1 << 20, 25 << 20);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], (std::vector<size_t>{5, 4, 3}));
  EXPECT_EQ(b[1], (std::vector<size_t>{2, 1, 0}));
}

TEST(Buckets, HugeTensorsGetTheirOwnBucketAndGroupsNeverMix) {
  std::vector<BucketParam> p{{100, "f32"}, {100, "f64"}, {1 << 30, "f32"}, {100, "f32"}};
  const auto b = assign_buckets(p, 1000, 1000);
  // Walking 3, 2 (f32: 3 + 2 fills the first f32 bucket), 1 (f64), 0 (f32).
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0], (std::vector<size_t>{3, 2}));
  EXPECT_EQ(b[1], (std::vector<size_t>{1}));
  EXPECT_EQ(b[2], (std::vector<size_t>{0}));
  const auto each = assign_buckets(p, 0, 0);
  ASSERT_EQ(each.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(each[i], (std::vector<size_t>{3 - i}));
  const auto one = assign_buckets(std::vector<BucketParam>(5, BucketParam{8, "f32"}), 1 << 30, 1 << 30);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].size(), 5u);
}

TEST(DistributedSampler, ShardsAreEqualDisjointAndCoverTheData) {
  for (int world : {1, 2, 3, 4}) {
    for (int64_t n : {1, 7, 10, 12}) {
      if (n < world) continue;
      std::multiset<int64_t> seen;
      for (int r = 0; r < world; ++r) {
        DistributedSampler s(n, world, r, 42);
        EXPECT_EQ(s.num_samples(), (n + world - 1) / world);
        for (int64_t i : s.shard(3)) seen.insert(i);
      }
      // Every item at least once; exactly total - n items are padding repeats.
      for (int64_t i = 0; i < n; ++i) EXPECT_GE(seen.count(i), 1u) << "n " << n << " world " << world;
      EXPECT_EQ(static_cast<int64_t>(seen.size()), (n + world - 1) / world * world);
    }
  }
}

TEST(DistributedSampler, DropLastTruncatesToEqualDisjointShards) {
  std::set<int64_t> seen;
  for (int r = 0; r < 3; ++r) {
    DistributedSampler s(10, 3, r, 1, true, /*drop_last=*/true);
    EXPECT_EQ(s.num_samples(), 3);
    for (int64_t i : s.shard(0)) EXPECT_TRUE(seen.insert(i).second) << "item " << i << " twice";
  }
  EXPECT_EQ(seen.size(), 9u);
  EXPECT_THROW(DistributedSampler(2, 3, 0, 1, true, true), UserError);
}

TEST(DistributedSampler, EpochsReshuffleTheSameWayOnEveryRankAndStridedShardsInterleave) {
  DistributedSampler whole(100, 1, 0, 9), r0(100, 2, 0, 9), r1(100, 2, 1, 9);
  EXPECT_NE(whole.shard(0), whole.shard(1));                             // set_epoch changes the order
  EXPECT_EQ(whole.shard(4), DistributedSampler(100, 1, 0, 9).shard(4));  // a pure function of (seed, epoch)
  EXPECT_NE(whole.shard(0), DistributedSampler(100, 1, 0, 10).shard(0));
  // Rank r of W takes positions r, r+W, ... of the single-process order (PyTorch's layout), so
  // the union of a step's local batches is the single-process global batch.
  for (int64_t k = 0; k < 50; ++k) {
    EXPECT_EQ(r0.index(2, k), whole.index(2, 2 * k));
    EXPECT_EQ(r1.index(2, k), whole.index(2, 2 * k + 1));
  }
  EXPECT_EQ(whole.stream_index(100 + 5), whole.index(1, 5));
  const DistributedSampler ordered(5, 1, 0, 0, /*shuffle=*/false);
  EXPECT_EQ(ordered.shard(7), (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

namespace {

// A world of one: every collective is already complete (enough to drive the reducer's hooks).
class SoloCommunicator : public Communicator {
  struct Done : CollectiveHandle {
    void wait() override {}
  };

 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "solo"; }
  std::unique_ptr<CollectiveHandle> allreduce_sum(at::Tensor&) override { return std::make_unique<Done>(); }
  void broadcast(at::Tensor&, int) override {}
  void barrier() override {}
};

}  // namespace

// Fine-tuning freezes parameters (the pretraining LM head); the reducer built over the whole
// module serves only the trainable ones: no bucket waits for a gradient that never comes.
TEST(Reducer, FrozenParametersAreSkipped) {
  torch::manual_seed(5);
  torch::nn::Sequential net(torch::nn::Linear(6, 5), torch::nn::Linear(5, 3));
  net[1]->as<torch::nn::Linear>()->weight.set_requires_grad(false);
  SoloCommunicator comm;
  roformer::config::DistConfig dist;
  dist.first_bucket_mb = 0;
  dist.bucket_mb = 0;  // a bucket per parameter
  auto reducer = roformer::run::make_reducer(*net, comm, dist);
  EXPECT_EQ(reducer->buckets().size(), 3u);  // 0.weight, 0.bias, 1.bias
  const torch::Tensor x = torch::randn({4, 6});
  net->forward(x).pow(2).sum().backward();
  std::vector<torch::Tensor> plain;
  for (auto& p : net->parameters()) plain.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  net->zero_grad();
  reducer->prepare_for_backward();
  net->forward(x).pow(2).sum().backward();
  reducer->finish();
  EXPECT_EQ(reducer->collectives_launched(), 3);
  const auto params = net->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_EQ(params[i].grad().defined(), plain[i].defined()) << i;
    if (plain[i].defined()) {
      EXPECT_TRUE(torch::equal(params[i].grad(), plain[i])) << i;
    }
  }
  EXPECT_FALSE(params[2].grad().defined());  // the frozen weight
}

}  // namespace dist_test
