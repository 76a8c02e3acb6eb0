// Helper processes (common/line_child.h, common/run_process.h) never hold a run forever: a child
// that says nothing, one that writes without a newline, one whose line outgrows the limit, one
// that never reads and one that never exits are each met by a bounded wait, a kill and a message
// that names it; a well-behaved child's lines pass through unchanged.
#include "roformer/common/line_child.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <string>

#include "roformer/common/errors.h"
#include "roformer/common/run_process.h"

namespace line_child_test {

using roformer::LineChild;
using roformer::LineRead;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

LineChild shell(const std::string& script, size_t max_line = roformer::kMaxLineBytes) {
  return LineChild({"/bin/sh", "-c", script}, "the test helper", max_line);
}

TEST(LineChild, PassesLinesBothWaysAndSeesTheEndOfItsOutput) {
  LineChild child = shell("echo ready; while read l; do echo \"got $l\"; done");
  std::string line;
  ASSERT_EQ(child.read_line(line, 5), LineRead::line);
  EXPECT_EQ(line, "ready");
  ASSERT_TRUE(child.write_line("one", 5));
  ASSERT_EQ(child.read_line(line, 5), LineRead::line);
  EXPECT_EQ(line, "got one");
  LineChild quits = shell("echo bye");
  ASSERT_EQ(quits.read_line(line, 5), LineRead::line);
  EXPECT_EQ(quits.read_line(line, 5), LineRead::closed);
}

TEST(LineChild, ASilentChildOrOneWithoutANewlineTimesOutAndIsNamed) {
  for (const char* script : {"exec sleep 600", "printf ready; exec sleep 600"}) {
    LineChild child = shell(script);
    std::string line;
    const auto start = Clock::now();
    EXPECT_EQ(child.read_line(line, 0.3), LineRead::timed_out) << script;
    EXPECT_LT(seconds_since(start), 5.0) << script;
    EXPECT_GE(seconds_since(start), 0.25) << script;
    const std::string why = child.describe(LineRead::timed_out, 0.3);
    EXPECT_NE(why.find("the test helper (pid " + std::to_string(child.pid()) + ")"), std::string::npos) << why;
    EXPECT_NE(why.find("within 0.3 s"), std::string::npos) << why;
    child.kill();
  }
}

TEST(LineChild, ALineLongerThanTheLimitIsRefused) {
  // In pieces through a pipe, and in one write that arrives with its newline.
  for (const char* script : {"head -c 5000 /dev/zero | tr '\\0' x; echo", "printf '%05000d\\n' 0"}) {
    LineChild child = shell(script, 1024);
    std::string line;
    EXPECT_EQ(child.read_line(line, 5), LineRead::too_long) << script;
    EXPECT_NE(child.describe(LineRead::too_long, 5).find("longer than 1024 bytes"), std::string::npos);
  }
}

TEST(LineChild, AWriteToAChildThatNeverReadsGivesUp) {
  LineChild child = shell("exec sleep 600");
  const auto start = Clock::now();
  EXPECT_FALSE(child.write_line(std::string(64 << 20, 'x'), 0.3));  // far past the socket's buffer
  EXPECT_LT(seconds_since(start), 5.0);
  child.kill();
}

TEST(LineChild, AChildThatNeverExitsIsKilledAfterTheExitWait) {
  ::setenv("ROFORMER_HELPER_TIMEOUT_S", "0.5", 1);
  const auto start = Clock::now();
  {
    LineChild child = shell("exec sleep 600");  // never reads, so never sees its input end
  }
  ::unsetenv("ROFORMER_HELPER_TIMEOUT_S");
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_GE(seconds_since(start), 0.45);
}

TEST(LineChild, ABadTimeoutSettingIsAUserError) {
  for (const char* bad : {"soon", "0", "-3", "inf", "1e9"}) {
    ::setenv("ROFORMER_HELPER_TIMEOUT_S", bad, 1);
    EXPECT_THROW(roformer::helper_timeout_seconds(), roformer::UserError) << bad;
  }
  ::setenv("ROFORMER_HELPER_TIMEOUT_S", "2.5", 1);
  EXPECT_EQ(roformer::helper_timeout_seconds(), 2.5);
  ::unsetenv("ROFORMER_HELPER_TIMEOUT_S");
  EXPECT_EQ(roformer::helper_timeout_seconds(), 120.0);
}

TEST(RunProcess, ReportsTheExitStatusAStartFailureAndATimeout) {
  EXPECT_TRUE(roformer::run_process({"/bin/sh", "-c", "exit 0"}, 5).ok());
  const auto failed = roformer::run_process({"/bin/sh", "-c", "exit 3"}, 5);
  EXPECT_TRUE(failed.started);
  EXPECT_EQ(failed.exit_code, 3);
  EXPECT_FALSE(roformer::run_process({"/no/such/program"}, 5).started);
  const auto start = Clock::now();
  const auto slow = roformer::run_process({"/bin/sh", "-c", "exec sleep 600"}, 0.3);
  EXPECT_TRUE(slow.timed_out);
  EXPECT_FALSE(slow.ok());
  EXPECT_LT(seconds_since(start), 5.0);
}

}  // namespace line_child_test
