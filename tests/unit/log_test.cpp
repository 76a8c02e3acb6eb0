// Tests for the logging facade: levels parse, records reach the run-directory log file with
// their level, below-threshold records are dropped, and bad level names are user errors.
#include <gtest/gtest.h>

#include "roformer/common/errors.h"
#include "roformer/common/log.h"
#include "test_support.h"

namespace log_test {

using namespace roformer;

TEST(Log, ParsesLevelsAndRejectsUnknownNames) {
  EXPECT_EQ(log::parse_level("debug"), log::Level::debug);
  EXPECT_EQ(log::parse_level("off"), log::Level::off);
  EXPECT_THROW(log::parse_level("verbose"), UserError);
}

TEST(Log, FileSinkReceivesRecordsAtDebugAndAbove) {
  roformer::testing::TempDir dir;
  log::init(log::Level::error, 1, 2);
  log::add_file(dir.file("train.log"));
  log::info("step ", 42, " loss ", 1.5);
  log::debug("details ", 7);
  log::trace("too fine");
  log::close_file();
  const std::string text = roformer::testing::read_file(dir.file("train.log"));
  EXPECT_NE(text.find("[info] step 42 loss 1.5"), std::string::npos) << text;
  EXPECT_NE(text.find("[debug] details 7"), std::string::npos) << text;
  EXPECT_EQ(text.find("too fine"), std::string::npos) << text;
  log::info("after close");
  EXPECT_EQ(roformer::testing::read_file(dir.file("train.log")).find("after close"), std::string::npos);
}

TEST(Log, RankPrefixAppearsOnConsoleForMultiProcessRuns) {
  log::init(log::Level::info, 3, 4);
  ::testing::internal::CaptureStderr();
  log::info("hello");
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("[rank 3]"), std::string::npos) << out;
  log::init(log::Level::info, 0, 1);
  ::testing::internal::CaptureStderr();
  log::info("single");
  const std::string single = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(single.find("[rank"), std::string::npos) << single;
}

}  // namespace log_test
