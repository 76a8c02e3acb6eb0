// Data parallel with real processes on CPU (Gloo), each rank started by scripts/launch.sh:
// equivalence with single-process training on the global batch in float64 (SGD and AdamW,
// three bucket layouts), bitwise-identical replicas from different seeds, no_sync, overlap
// and launch order, refusals before any gradient collective (mismatched model, unused
// parameter), failures (killed rank, missing rank, failing rank reported by the launcher),
// and `roformer train` under 2 ranks: same loss curve as one process (also with packed
// documents and one document per row), bitwise resume.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <utility>
#include <vector>

#include "roformer/common/files.h"
#include "test_support.h"

namespace ddp_test {

using namespace roformer::testing;
using Clock = std::chrono::steady_clock;

namespace {

std::string launch(int nproc) {
  return "'" + source_dir() + "/scripts/launch.sh' --nproc " + std::to_string(nproc) + " --timeout 120 -- ";
}

// "[rank R] RESULT key=value" lines -> results[R][key].
std::map<int, std::map<std::string, std::string>> results(const std::string& output) {
  std::map<int, std::map<std::string, std::string>> out;
  static const std::regex line(R"(\[rank (\d+)\] RESULT ([a-z_]+)=(\S*))");
  for (std::sregex_iterator it(output.begin(), output.end(), line), end; it != end; ++it)
    out[std::stoi((*it)[1])][(*it)[2]] = (*it)[3];
  return out;
}

struct WorkerRun {
  CommandResult r;
  std::map<int, std::map<std::string, std::string>> res;
  double seconds = 0;
};

WorkerRun worker(int nproc, const std::string& args, const std::string& env = "") {
  const auto t0 = Clock::now();
  WorkerRun run;
  run.r = run_command(env + " " + launch(nproc) + "'" + ddp_worker_binary() + "' " + args);
  run.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  run.res = results(run.r.output);
  return run;
}

int free_port() {
  const auto r = run_command(
      "python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\",0)); print(s.getsockname()[1])'");
  return std::stoi(r.output);
}

}  // namespace

TEST(DataParallel, EqualsSingleProcessOnTheGlobalBatchForEveryBucketLayout) {
  const std::vector<std::pair<std::string, std::string>> layouts{
      {"per-parameter", "0 0"}, {"default", "1048576 26214400"}, {"one bucket", "1099511627776 1099511627776"}};
  for (const std::string opt : {"sgd", "adamw"}) {
    std::string first_checksum;
    for (const auto& [name, caps] : layouts) {
      const WorkerRun run = worker(2, "equivalence " + opt + " " + caps);
      ASSERT_EQ(run.r.exit_code, 0) << run.r.output;
      ASSERT_EQ(run.res.size(), 2u) << run.r.output;
      for (const auto& [rank, kv] : run.res) EXPECT_LE(std::stod(kv.at("max_diff")), 1e-10) << opt << " " << name;
      EXPECT_EQ(run.res.at(0).at("checksum"), run.res.at(1).at("checksum")) << opt << " " << name;
      if (name == "per-parameter") {
        EXPECT_EQ(run.res.at(0).at("buckets"), "8");
      } else if (name == "one bucket") {
        EXPECT_EQ(run.res.at(0).at("buckets"), "1");
      }
      // With two ranks each element's sum has one rounding, whatever the bucketing: bitwise equal.
      if (first_checksum.empty()) first_checksum = run.res.at(0).at("checksum");
      EXPECT_EQ(run.res.at(0).at("checksum"), first_checksum) << opt << " " << name;
    }
  }
  const WorkerRun three = worker(3, "equivalence adamw 1048576 26214400");
  ASSERT_EQ(three.r.exit_code, 0) << three.r.output;
  for (const auto& [rank, kv] : three.res) EXPECT_LE(std::stod(kv.at("max_diff")), 1e-10) << "rank " << rank;
}

TEST(DataParallel, ReplicasStayBitwiseIdenticalFromDifferentSeeds) {
  const WorkerRun run = worker(3, "equivalence adamw 0 0 30");
  ASSERT_EQ(run.r.exit_code, 0) << run.r.output;
  ASSERT_EQ(run.res.size(), 3u);
  EXPECT_EQ(run.res.at(0).at("checksum"), run.res.at(1).at("checksum"));
  EXPECT_EQ(run.res.at(0).at("checksum"), run.res.at(2).at("checksum"));
}

TEST(DataParallel, NoSyncMicroStepsEqualOneLargeBatchAndCommunicateOnlyOnTheSyncedStep) {
  const WorkerRun run = worker(2, "nosync 3");
  ASSERT_EQ(run.r.exit_code, 0) << run.r.output;
  for (const auto& [rank, kv] : run.res) {
    EXPECT_LE(std::stod(kv.at("max_diff")), 1e-10);
    // 5 optimizer steps x the buckets, nothing during the 2 unsynced micro-steps of each.
    EXPECT_EQ(std::stoi(kv.at("collectives")), 5 * std::stoi(kv.at("buckets")));
  }
}

TEST(DataParallel, FirstBucketLaunchesBeforeBackwardEndsInTheSameOrderOnEveryRank) {
  const WorkerRun run = worker(2, "overlap");
  ASSERT_EQ(run.r.exit_code, 0) << run.r.output;
  for (const auto& [rank, kv] : run.res) EXPECT_EQ(kv.at("first_launch_before_last_hook"), "yes") << "rank " << rank;
  const std::string order = run.res.at(0).at("launch_order");
  EXPECT_EQ(order.substr(0, 16), "0,1,2,3,4,5,6,7,");  // bucket index order, step after step
  EXPECT_EQ(order, run.res.at(1).at("launch_order"));
}

TEST(DataParallel, MismatchedModelIsRefusedBeforeAnyGradientNamingRankAndParameter) {
  const WorkerRun run = worker(2, "mismatch");
  EXPECT_NE(run.r.exit_code, 0);
  EXPECT_NE(run.r.output.find("rank 1 has a different model than rank 0"), std::string::npos) << run.r.output;
  EXPECT_NE(run.r.output.find("fc1.weight [9, 6]"), std::string::npos) << run.r.output;
  EXPECT_EQ(run.r.output.find("RESULT max_diff"), std::string::npos);  // no step ran
}

TEST(DataParallel, ParameterWithoutGradientIsNamed) {
  const WorkerRun run = worker(2, "unused");
  EXPECT_NE(run.r.exit_code, 0);
  EXPECT_NE(run.r.output.find("received no gradient in this backward: side.weight, side.bias"), std::string::npos)
      << run.r.output;
}

TEST(DataParallel, KilledRankMakesTheOthersFailWithinTheTimeout) {
  // Ranks started by hand (no launcher to stop the survivor): rank 0 must fail by itself.
  TempDir dir;
  const std::string env =
      "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(free_port()) + " DDP_TIMEOUT_S=10 ";
  const auto t0 = Clock::now();
  const auto r = run_command("(RANK=0 " + env + "'" + ddp_worker_binary() + "' kill > '" + dir.file("r0") +
                             "' 2>&1; echo $? > '" + dir.file("rc0") + "') & RANK=1 " + env + "'" +
                             ddp_worker_binary() + "' kill > '" + dir.file("r1") + "' 2>&1; wait");
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_NE(std::stoi(read_file(dir.file("rc0"))), 0) << read_file(dir.file("r0"));
  EXPECT_NE(read_file(dir.file("r0")).find("error:"), std::string::npos) << read_file(dir.file("r0"));
  EXPECT_LT(seconds, 30.0);
}

TEST(DataParallel, MissingRankIsARendezvousTimeout) {
  const auto t0 = Clock::now();
  const auto r = run_command("RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(free_port()) +
                             " DDP_TIMEOUT_S=2 '" + ddp_worker_binary() + "' equivalence sgd 0 0");
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 2) << r.output;  // the environment's fault (a peer never came), not ours
  EXPECT_NE(r.output.find("rendezvous at MASTER_ADDR:MASTER_PORT=127.0.0.1:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("are all 2 ranks started"), std::string::npos) << r.output;
  EXPECT_LT(seconds, 20.0);
}

TEST(DataParallel, LauncherReportsTheFailingRankAndStopsTheOthers) {
  const auto t0 = Clock::now();
  const auto r = run_command(launch(3) + "sh -c 'if [ \"$RANK\" = 2 ]; then echo bad input >&2; exit 7; fi; sleep 60'");
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 7) << r.output;
  EXPECT_NE(r.output.find("[launch] rank 2 (pid"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("failed with exit status 7"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rank 2] bad input"), std::string::npos) << r.output;
  EXPECT_LT(seconds, 20.0);  // the sleeping ranks were stopped
  // A rank killed by a signal is named with the signal, also when its peer fails on the lost
  // connection before the launcher looks (it named the peer, "failed with exit status 1").
  const auto killed = run_command(
      launch(2) + "sh -c 'if [ \"$RANK\" = 1 ]; then kill -KILL $$; fi; sleep 0.05; echo lost my peer >&2; exit 1'");
  EXPECT_EQ(killed.exit_code, 137) << killed.output;
  EXPECT_NE(killed.output.find("[launch] rank 1 (pid"), std::string::npos) << killed.output;
  EXPECT_NE(killed.output.find("was killed by signal 9 (KILL)"), std::string::npos) << killed.output;
  const auto bad = run_command("'" + source_dir() + "/scripts/launch.sh' --nproc zero -- true");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("--nproc must be a positive integer"), std::string::npos);
}

// ---- the trainer under two ranks
namespace {

struct TrainFixture {
  TempDir dir;
  std::string dataset, config;
  TrainFixture() : dataset(make_word_dataset(dir)), config(write_tiny_config(dir, dataset)) {}
  CommandResult train(int nproc, const std::string& run, const std::string& extra) const {
    const std::string cmd = "'" + roformer_binary() + "' train '" + config + "' --run-dir '" + run + "' " + extra;
    return run_command(nproc > 1 ? launch(nproc) + cmd : cmd);
  }
};

std::vector<double> losses(const std::string& run, const std::string& type) {
  std::vector<double> out;
  std::istringstream in(read_file(run + "/metrics.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] == type) out.push_back(j["loss"].get<double>());
  }
  return out;
}

}  // namespace

TEST(DataParallel, TrainerWithTwoRanksFollowsTheSingleProcessLossCurve) {
  TrainFixture f;
  const std::string no_dropout = "--set model.hidden_dropout=0 --set model.attention_dropout=0 ";
  // Packed documents reach every rank's rows too: segments and positions (documents), padding (none).
  const std::string docs = "--set data.path=" + make_document_dataset(f.dir);
  const std::vector<std::pair<std::string, std::string>> settings{
      {"random", "--set data.sampling=random"},
      {"packed", "--set data.sampling=packed"},
      {"documents", docs + " --set data.sampling=packed --set data.packing=documents"},
      {"none", docs + " --set data.packing=none"}};
  for (const auto& [sampling, setting] : settings) {
    const std::string one = f.dir.file("one-" + sampling), two = f.dir.file("two-" + sampling);
    const std::string extra = no_dropout + setting;
    ASSERT_EQ(f.train(1, one, extra).exit_code, 0);
    const auto r = f.train(2, two, extra);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // The launcher tags each line with its rank; the log does not tag it a second time.
    EXPECT_NE(r.output.find("[rank 0] ["), std::string::npos) << r.output;
    EXPECT_FALSE(std::regex_search(r.output, std::regex(R"(\[rank 0\] \[[0-9:]+\] \[rank 0\])"))) << r.output;
    const auto a = losses(one, "train"), b = losses(two, "train");
    ASSERT_EQ(a.size(), b.size());
    ASSERT_EQ(a.size(), 8u);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4 * a[i]) << sampling << " record " << i;
    const auto ea = losses(one, "eval"), eb = losses(two, "eval");
    ASSERT_EQ(ea.size(), eb.size());
    for (size_t i = 0; i < ea.size(); ++i) EXPECT_NEAR(ea[i], eb[i], 1e-4 * ea[i]) << sampling << " eval " << i;
    EXPECT_EQ(run_command("ls '" + two + "/checkpoints'").output, "step_10\nstep_20\nstep_30\nstep_40\n");
  }
  // A global batch that does not split over the ranks is refused before anything is written.
  const auto bad = f.train(3, f.dir.file("three"), no_dropout);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("must split evenly over 3 rank(s)"), std::string::npos) << bad.output;
}

TEST(DataParallel, TwoRankRunStoppedAndResumedInFreshProcessesIsBitwiseIdentical) {
  TrainFixture f;  // the tiny config has dropout: per-rank dropout streams must resume exactly too
  const std::string straight = f.dir.file("straight"), resumed = f.dir.file("resumed");
  ASSERT_EQ(f.train(2, straight, "--set train.checkpoint_every=20").exit_code, 0);
  ASSERT_EQ(f.train(2, resumed, "--set train.checkpoint_every=20").exit_code, 0);
  ASSERT_EQ(run_command("rm -rf '" + resumed + "/checkpoints/step_40'").exit_code, 0);
  const auto r = f.train(2, resumed, "--set train.checkpoint_every=20 --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos);
  EXPECT_EQ(safetensors_difference(checkpoint_weights(straight, 40), checkpoint_weights(resumed, 40)), "");
  EXPECT_EQ(losses(straight, "train"), losses(resumed, "train"));
}

TEST(DataParallel, TrainerRunsUnderTorchrunLikeUnderTheLauncher) {
  const std::string torchrun = source_dir() + "/.venv/bin/torchrun";
  if (run_command("test -x '" + torchrun + "'").exit_code != 0) GTEST_SKIP() << "no torchrun in .venv";
  TrainFixture f;
  const std::string extra = "--set train.steps=20 ";
  const std::string launched = f.dir.file("launched"), elastic = f.dir.file("elastic");
  ASSERT_EQ(f.train(2, launched, extra).exit_code, 0);
  // torchrun's agent hosts the store itself (TORCHELASTIC_USE_AGENT_STORE): rank 0 must not.
  const auto r = run_command("'" + torchrun + "' --nproc-per-node 2 --master-port " + std::to_string(free_port()) +
                             " --no-python '" + roformer_binary() + "' train '" + f.config + "' --run-dir '" + elastic +
                             "' " + extra);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(losses(launched, "train"), losses(elastic, "train"));
  EXPECT_EQ(safetensors_difference(checkpoint_weights(launched, 20), checkpoint_weights(elastic, 20)), "");
}

TEST(DataParallel, SignalToOneRankStopsEveryRankAfterTheSameStepWithACheckpoint) {
  TrainFixture f;
  const std::string run = f.dir.file("run");
  const std::string env = "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(free_port());
  const std::string cmd = "'" + roformer_binary() + "' train '" + f.config + "' --run-dir '" + run +
                          "' --set train.steps=100000 --set train.checkpoint_every=100000 ";
  // Rank 1 alone gets SIGTERM once training is under way; rank 0 must learn it through the step's reduction.
  const auto r = run_command("RANK=0 " + env + " " + cmd + " > '" + f.dir.file("r0") + "' 2>&1 & p0=$!; RANK=1 " + env +
                             " " + cmd + " > '" + f.dir.file("r1") +
                             "' 2>&1 & p1=$!; "
                             "for i in $(seq 100); do grep -q 'step 5/' '" +
                             f.dir.file("r0") +
                             "' 2>/dev/null && break; sleep 0.2; done; kill -TERM $p1; "
                             "wait $p0; echo rc0=$?; wait $p1; echo rc1=$?");
  EXPECT_NE(r.output.find("rc0=143"), std::string::npos) << r.output << read_file(f.dir.file("r0"));
  EXPECT_NE(r.output.find("rc1=143"), std::string::npos) << r.output << read_file(f.dir.file("r1"));
  const std::string log0 = read_file(f.dir.file("r0")), log1 = read_file(f.dir.file("r1"));
  const auto stopped_at = [](const std::string& log) {
    const size_t p = log.find("after step ");
    return p == std::string::npos ? std::string("none") : log.substr(p + 11, log.find(';', p) - p - 11);
  };
  EXPECT_NE(stopped_at(log0), "none") << log0;
  EXPECT_EQ(stopped_at(log0), stopped_at(log1));
  EXPECT_TRUE(roformer::path_exists(run + "/checkpoints/step_" + stopped_at(log0) + "/meta.json"));
}

// A peer that vanishes mid-run (rank 1 SIGKILLs itself before step 6) is not this rank's bug:
// rank 0, started without the launcher so nothing stops it first, fails its next collective
// on the lost connection and exits 2 saying another rank is gone and how to continue.
TEST(DataParallel, ARankWhosePeerVanishesSaysSoWithExitTwo) {
  TrainFixture f;
  const std::string run = f.dir.file("run");
  const std::string port =
      "$(python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\",0)); print(s.getsockname()[1])')";
  const std::string train = "'" + roformer_binary() + "' train '" + f.config + "' --run-dir '" + run +
                            "' --set train.steps=40 --set train.log_every=1";
  const auto r = run_command("export MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port +
                             " WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 ROFORMER_FAULT_KILL_RANK=1:6; "
                             "(RANK=1 LOCAL_RANK=1 " +
                             train + " > '" + f.dir.file("rank1.log") +
                             "' 2>&1 &); "
                             "RANK=0 LOCAL_RANK=0 " +
                             train);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("failed: another rank is gone"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--resume auto"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
}

}  // namespace ddp_test
