// lib/util/check.h: a failed MEMSIM_CHECK (a bug in memsim) throws InternalError instead of
// aborting, so the CLI exits with its own code and Python raises memsim.Error.
#include "lib/util/check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace memsim {
namespace {

using ::testing::HasSubstr;

int Checked(int v) {
  MEMSIM_CHECK(v >= 0);
  return v;
}

TEST(CheckTest, AFailedCheckThrowsInternalErrorNamingFileLineAndCondition) {
  EXPECT_EQ(Checked(3), 3);
  try {
    Checked(-1);
    FAIL() << "no exception";
  } catch (const InternalError& e) {
    EXPECT_THAT(e.what(), HasSubstr("check_test.cc:"));
    EXPECT_THAT(e.what(), HasSubstr("internal error: check failed: v >= 0"));
  }
  EXPECT_NE(kInternalErrorExit, 2);  // bad input's exit code
}

}  // namespace
}  // namespace memsim
