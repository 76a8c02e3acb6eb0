// Crash and disk-fault reliability of `roformer train`, as processes: the quickstart RoPE
// model killed with SIGKILL ten times (at random moments and half-way through checkpoint
// writes) and resumed with --resume auto each time ends bitwise equal to an uninterrupted
// run, and no incomplete checkpoint is ever picked up; a run directory that cannot be
// written, or a file-size limit hit mid-run (a full disk, as the OS reports it: EFBIG), stops
// the run with a clear error and the previous checkpoint intact.
#include <gtest/gtest.h>

#include <random>

#include "roformer/common/files.h"
#include "test_support.h"

namespace reliability_test {

using namespace roformer::testing;

namespace {

struct Fixture {
  TempDir dir;
  std::string dataset;
  Fixture() : dataset(make_word_dataset(dir, 60000)) {}
  std::string train(const std::string& run, const std::string& extra) const {
    return "'" + roformer_binary() + "' train '" + source_dir() + "/configs/quickstart/rope.yaml' --run-dir '" + run +
           "' --set data.path=" + dataset +
           " --set data.seq_len=64 --set train.batch_size=8 --set train.threads=1 --set train.warmup_steps=10"
           " --set train.eval_every=100 --set train.eval_batches=2 --set train.log_every=10"
           " --set model.hidden_dropout=0.1 " +
           extra;
  }
};

std::string checkpoint_listing(const std::string& run) {
  return run_command("ls -a '" + run + "/checkpoints' 2>/dev/null").output;
}

// Every visible step_N directory must be complete: checkpoints being written or pruned are
// hidden (.tmp-step_N-PID, .tmp-discard-step_N-PID) until they are whole or gone.
void expect_only_complete_checkpoints(const std::string& run) {
  const auto r = run_command("cd '" + run +
                             "/checkpoints' 2>/dev/null && for d in step_*; do [ -d \"$d\" ] || continue; "
                             "for f in model.safetensors trainer.pt config.yaml meta.json; do "
                             "[ -f \"$d/$f\" ] || echo \"incomplete $d ($f)\"; done; done");
  EXPECT_EQ(r.output, "") << checkpoint_listing(run);
}

std::string train_losses(const std::string& run) {
  return run_command("grep '\"type\":\"train\"' '" + run +
                     "/metrics.jsonl' | sed 's/\"elapsed_s\":[^,]*,//; "
                     "s/\"tokens_per_s\":[^,}]*//; s/\"tflops\":[^,}]*//; s/\"mfu\":[^,}]*//; "
                     "s/\"peak_mem_gib\":[^,}]*//'")
      .output;
}

}  // namespace

TEST(Reliability, TenKillsIncludingDuringCheckpointWritesResumeToTheSameBits) {
  Fixture f;
  // Long enough that ten kills (random ones last up to 2 s) land before the run can finish on
  // an idle machine: at 200 steps a fast run finished after six.
  const std::string steps = "--set train.steps=400 --set train.checkpoint_every=10 ";
  const std::string straight = f.dir.file("straight"), killed = f.dir.file("killed");
  ASSERT_EQ(run_command(f.train(straight, steps)).exit_code, 0);
  std::mt19937 rng(2026);
  int kills = 0, in_checkpoint = 0;
  for (int attempt = 0; attempt < 10; ++attempt) {
    int64_t latest = 0;
    const auto ls =
        run_command("ls '" + killed + "/checkpoints' 2>/dev/null | sed -n 's/^step_//p' | sort -n | tail -1");
    if (!ls.output.empty()) latest = std::stoll(ls.output);
    CommandResult r;
    int64_t doomed = -1;
    if (attempt % 2 == 0) {  // die half-way through writing the next checkpoint
      doomed = latest + 10;
      r = run_command("ROFORMER_FAULT_KILL_IN_CHECKPOINT=" + std::to_string(doomed) + " " +
                      f.train(killed, steps + "--resume auto"));
    } else {  // die at a random moment
      const double seconds = std::uniform_real_distribution<double>(0.4, 2.0)(rng);
      r = run_command("timeout -s KILL " + std::to_string(seconds) + " " + f.train(killed, steps + "--resume auto"));
    }
    if (r.exit_code == 0) break;  // finished
    ASSERT_EQ(r.exit_code, 137) << r.output;
    ++kills;
    expect_only_complete_checkpoints(killed);
    if (doomed > 0) {
      ++in_checkpoint;
      // The half-written checkpoint stays a hidden temporary, never step_N.
      EXPECT_FALSE(roformer::path_exists(killed + "/checkpoints/step_" + std::to_string(doomed)))
          << checkpoint_listing(killed);
      EXPECT_NE(checkpoint_listing(killed).find(".tmp-step_" + std::to_string(doomed)), std::string::npos);
    }
    // A run that got as far as training must have resumed from the newest checkpoint (a
    // random kill may also land during start-up, before anything is logged).
    if (latest > 0 && r.output.find("/400 |") != std::string::npos &&
        r.output.find("resumed from " + killed + "/checkpoints/step_" + std::to_string(latest) + " ") ==
            std::string::npos)
      ADD_FAILURE() << "attempt " << attempt << " trained without resuming from step " << latest << ":\n" << r.output;
  }
  EXPECT_EQ(kills, 10);
  EXPECT_EQ(in_checkpoint, 5);
  const auto r = run_command(f.train(killed, steps + "--resume auto"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(safetensors_difference(checkpoint_weights(straight, 400), checkpoint_weights(killed, 400)), "");
  EXPECT_EQ(train_losses(straight), train_losses(killed));
  EXPECT_EQ(checkpoint_listing(killed).find(".tmp-"), std::string::npos);  // swept by later saves
}

TEST(Reliability, UnwritableRunDirectoryIsRefusedBeforeTraining) {
  Fixture f;
  auto r = run_command(f.train("/dev/null/run", "--set train.steps=10"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("/dev/null/run"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step 10/10"), std::string::npos);  // no training happened
  // A file-size limit of zero: the write probe fails before the first step.
  const std::string run = f.dir.file("limited");
  r = run_command("sh -c \"ulimit -f 0; exec " + f.train(run, "--set train.steps=10") + "\" 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("File too large"), std::string::npos) << r.output;
  EXPECT_FALSE(roformer::path_exists(run + "/checkpoints"));
  EXPECT_FALSE(roformer::path_exists(run + "/config.yaml"));
}

TEST(Reliability, DiskFullMidRunStopsWithThePreviousCheckpointIntact) {
  Fixture f;
  const std::string steps = "--set train.steps=40 --set train.checkpoint_every=10 ";
  const std::string straight = f.dir.file("straight"), run = f.dir.file("run");
  ASSERT_EQ(run_command(f.train(straight, steps)).exit_code, 0);
  // Reach step 20 (killed while writing step 30), then resume under a 1 MiB file-size limit:
  // the weights (1.8 MB) no longer fit when step 30 is saved.
  ASSERT_EQ(run_command("ROFORMER_FAULT_KILL_IN_CHECKPOINT=30 " + f.train(run, steps)).exit_code, 137);
  const std::string step20 = read_file(run + "/checkpoints/step_20/model.safetensors");
  const auto full = run_command("sh -c \"ulimit -f 2048; exec " + f.train(run, steps + "--resume auto") + "\" 2>&1");
  EXPECT_EQ(full.exit_code, 2) << full.output;
  EXPECT_NE(full.output.find("File too large"), std::string::npos) << full.output;
  EXPECT_NE(full.output.find("training stopped at step 30; the previous checkpoint"), std::string::npos) << full.output;
  EXPECT_NE(full.output.find("step_20 is intact"), std::string::npos) << full.output;
  EXPECT_TRUE(read_file(run + "/checkpoints/step_20/model.safetensors") == step20) << "step_20 was rewritten";
  EXPECT_FALSE(roformer::path_exists(run + "/checkpoints/step_30"));
  EXPECT_EQ(checkpoint_listing(run).find(".tmp-step_"), std::string::npos);  // the failed save cleaned up
  expect_only_complete_checkpoints(run);
  // With space again the run continues from step 20 and ends where an uninterrupted run does.
  const auto done = run_command(f.train(run, steps + "--resume auto"));
  ASSERT_EQ(done.exit_code, 0) << done.output;
  EXPECT_NE(done.output.find("step_20 at step 20"), std::string::npos) << done.output;
  EXPECT_EQ(safetensors_difference(checkpoint_weights(straight, 40), checkpoint_weights(run, 40)), "");
}

// The optimizer state (trainer.pt) is the larger file and written second: a file-size limit
// between the two sizes fails it alone. LibTorch's own writer aborted the process there (its
// destructor rethrew the failed write); now it is a clear error with the previous checkpoint intact.
TEST(Reliability, DiskFullAtTheOptimizerStateStopsWithThePreviousCheckpointIntact) {
  Fixture f;
  const std::string steps = "--set train.steps=20 --set train.checkpoint_every=10 ";
  const std::string straight = f.dir.file("straight"), run = f.dir.file("run");
  ASSERT_EQ(run_command(f.train(straight, steps)).exit_code, 0);
  const size_t weights = read_file(straight + "/checkpoints/step_10/model.safetensors").size();
  const size_t optimizer = read_file(straight + "/checkpoints/step_10/trainer.pt").size();
  ASSERT_LT(weights + 64 * 1024, optimizer);
  ASSERT_EQ(run_command("ROFORMER_FAULT_KILL_IN_CHECKPOINT=20 " + f.train(run, steps)).exit_code, 137);
  const std::string step10 = read_file(run + "/checkpoints/step_10/trainer.pt");
  const size_t blocks = (weights + optimizer) / 2 / 512;  // sh's ulimit -f counts 512-byte blocks
  const auto full = run_command("sh -c \"ulimit -f " + std::to_string(blocks) + "; exec " +
                                f.train(run, steps + "--resume auto") + "\" 2>&1");
  EXPECT_EQ(full.exit_code, 2) << full.output;
  EXPECT_NE(full.output.find("trainer.pt' failed: File too large"), std::string::npos) << full.output;
  EXPECT_NE(full.output.find("training stopped at step 20; the previous checkpoint"), std::string::npos) << full.output;
  EXPECT_TRUE(read_file(run + "/checkpoints/step_10/trainer.pt") == step10) << "step_10 was rewritten";
  EXPECT_FALSE(roformer::path_exists(run + "/checkpoints/step_20"));
  EXPECT_EQ(checkpoint_listing(run).find(".tmp-step_"), std::string::npos);  // the failed save cleaned up
  expect_only_complete_checkpoints(run);
}

// A full disk at each file of a checkpoint in turn (fault injection: the write fails with
// ENOSPC's message at the save of step 20): exit 2 naming the file, the previous checkpoint
// (step_10) bitwise as an uninterrupted run wrote it, no step_20 and no temporary left; with
// space again the run resumes and ends where the uninterrupted one does.
TEST(Reliability, DiskFullAtEveryFileOfACheckpointKeepsThePreviousOne) {
  Fixture f;
  const std::string steps = "--set train.steps=20 --set train.checkpoint_every=10 ";
  const std::string straight = f.dir.file("straight");
  ASSERT_EQ(run_command(f.train(straight, steps)).exit_code, 0);
  for (const std::string file : {"model.safetensors", "trainer.pt", "config.yaml", "meta.json"}) {
    SCOPED_TRACE(file);
    const std::string run = f.dir.file("full-" + file);
    const auto full = run_command("ROFORMER_FAULT_FULL_DISK_AT=20:" + file + " " + f.train(run, steps) + " 2>&1");
    EXPECT_EQ(full.exit_code, 2) << full.output;
    EXPECT_NE(full.output.find(file + "' failed: No space left on device"), std::string::npos) << full.output;
    EXPECT_NE(full.output.find("step_10 is intact"), std::string::npos) << full.output;
    EXPECT_EQ(safetensors_difference(checkpoint_weights(straight, 10), checkpoint_weights(run, 10)), "");
    EXPECT_FALSE(roformer::path_exists(run + "/checkpoints/step_20"));
    EXPECT_EQ(checkpoint_listing(run).find(".tmp-step_"), std::string::npos);
    expect_only_complete_checkpoints(run);
    const auto done = run_command(f.train(run, steps + "--resume auto"));
    ASSERT_EQ(done.exit_code, 0) << done.output;
    EXPECT_EQ(safetensors_difference(checkpoint_weights(straight, 20), checkpoint_weights(run, 20)), "");
  }
}

// One process at a time per run directory: while a run trains, a second `train` on its
// directory (resuming it, or a fresh run with another seed) stops with exit 2 before writing,
// and the first run's metrics stay one run's, in order.
TEST(Reliability, ASecondRunOnABusyRunDirectoryStopsAndChangesNothing) {
  Fixture f;
  const std::string run = f.dir.file("run");
  const auto r = run_command(
      f.train(run, "--set train.steps=100000 --set train.checkpoint_every=100000") + " > '" + f.dir.file("first.log") +
      "' 2>&1 & first=$!; "
      "for i in $(seq 600); do grep -q '\"type\":\"train\"' '" +
      run +
      "/metrics.jsonl' 2>/dev/null && break; "
      "sleep 0.1; done; " +
      f.train(run, "--resume auto") + "; echo \"resume exit $?\"; " + f.train(run, "--set train.seed=7") +
      "; echo \"fresh exit $?\"; kill -TERM $first; wait $first; "
      "echo \"first exit $?\"");
  EXPECT_NE(r.output.find("resume exit 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("fresh exit 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("is in use by another roformer process"), std::string::npos) << r.output;
  const auto records = metric_records(run, "train");
  ASSERT_FALSE(records.empty()) << read_file(f.dir.file("first.log"));
  for (size_t i = 1; i < records.size(); ++i)
    EXPECT_LT(records[i - 1]["step"].get<int64_t>(), records[i]["step"].get<int64_t>()) << "record " << i;
  EXPECT_EQ(run_command("grep -c 'resumed from' '" + run + "/train.log'").output, "0\n");
}

}  // namespace reliability_test
