// CPU availability (common/cpu_availability.h): /proc/stat parsing against a transcribed sample,
// the busy share between two samples, the free count's rounding, and a live probe that must see a
// CPU-bound child process as one busy CPU.
#include "roformer/common/cpu_availability.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

namespace {

using roformer::CpuAvailability;

// Two samples of a 2-CPU machine, 100 jiffies apart per CPU: cpu0 busy 90 of 100 (user 60 +
// system 25 + softirq 5), cpu1 busy 10 of 100. The aggregate "cpu" line must be ignored.
const char* kBefore =
    "cpu  2000 0 1000 5000 100 0 10 0 0 0\n"
    "cpu0 1000 0 500 2500 50 0 5 0 0 0\n"
    "cpu1 1000 0 500 2500 50 0 5 0 0 0\n"
    "intr 1 2 3\n";
const char* kAfter =
    "cpu  2070 0 1030 5090 110 0 15 0 0 0\n"
    "cpu0 1060 0 525 2505 55 0 10 0 0 0\n"
    "cpu1 1005 0 505 2585 55 0 5 0 0 0\n";

TEST(CpuAvailability, ParsesThePerCpuLinesOfProcStat) {
  const auto cpus = roformer::parse_proc_stat(kBefore);
  ASSERT_EQ(cpus.size(), 2u);
  EXPECT_EQ(cpus.at(0).busy, 1000 + 500 + 5);
  EXPECT_EQ(cpus.at(0).total, 1000 + 500 + 5 + 2500 + 50);
  EXPECT_TRUE(roformer::parse_proc_stat("cpu0 garbage\n").empty());
}

TEST(CpuAvailability, BusyIsEachAllowedCpusBusyShareSummed) {
  const auto before = roformer::parse_proc_stat(kBefore), after = roformer::parse_proc_stat(kAfter);
  EXPECT_NEAR(roformer::busy_cpus(before, after, {0, 1}), 0.9 + 0.1, 1e-12);
  EXPECT_NEAR(roformer::busy_cpus(before, after, {0}), 0.9, 1e-12);     // the affinity mask counts
  EXPECT_NEAR(roformer::busy_cpus(before, after, {1, 7}), 0.1, 1e-12);  // a CPU not in /proc/stat adds nothing
}

TEST(CpuAvailability, FreeRoundsBusyToWholeCpusAndKeepsOne) {
  EXPECT_EQ((CpuAvailability{2, 0.1}.free()), 2);
  EXPECT_EQ((CpuAvailability{2, 0.97}.free()), 1);
  EXPECT_EQ((CpuAvailability{2, 1.9}.free()), 1);
  EXPECT_EQ((CpuAvailability{16, 3.4}.free()), 13);
  EXPECT_EQ((CpuAvailability{1, 1.0}.free()), 1);
}

TEST(CpuAvailability, ALiveProbeSeesACpuBoundChildAsABusyCpu) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    volatile unsigned long spin = 0;
    while (std::chrono::steady_clock::now() < end) ++spin;
    _exit(0);
  }
  const CpuAvailability a = roformer::sample_cpu_availability(std::chrono::milliseconds(300));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_GE(a.allowed, 1);
  EXPECT_GE(a.busy, 0.6) << "the spinning child was not seen";
  if (a.allowed >= 2) {
    EXPECT_LE(a.free(), a.allowed - 1);
  }
}

}  // namespace
