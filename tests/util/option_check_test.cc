// lib/util/option_check: option values are parsed and range-checked, errors name the option.
#include "lib/util/option_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace memsim {
namespace {

using ::testing::HasSubstr;

TEST(OptionCheckTest, NegativeBatchIsOutOfRange) {
  auto r = ParseIntOption("--batch", "-5", 1, int64_t{1} << 40);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("--batch: '-5' is out of range [1, "));
}

TEST(OptionCheckTest, ValueNear2To63IsOutOfRangeAndBeyondIsNot64Bit) {
  auto near = ParseIntOption("--cublas-workspace", "9223372036854775807", 0, int64_t{1} << 50);
  ASSERT_FALSE(near.ok());
  EXPECT_THAT(near.status().message(), HasSubstr("out of range"));
  auto beyond = ParseIntOption("--cublas-workspace", "9223372036854775808", 0, int64_t{1} << 50);
  ASSERT_FALSE(beyond.ok());
  EXPECT_THAT(beyond.status().message(), HasSubstr("does not fit in 64 bits"));
}

TEST(OptionCheckTest, GarbageIsNotAnInteger) {
  for (const char* bad : {"", "12x", "x", " 1", "1.5"}) {
    auto r = ParseIntOption("--batch", bad, 0, 10);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("is not an integer"));
  }
  EXPECT_EQ(*ParseIntOption("--batch", "7", 0, 10), 7);
}

TEST(OptionCheckTest, ListsAreCheckedItemByItem) {
  auto ok = ParseIntListOption("--batch", "8,16,32", 1, 1024);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, (std::vector<int64_t>{8, 16, 32}));
  EXPECT_FALSE(ParseIntListOption("--batch", "8,,32", 1, 1024).ok());
  EXPECT_FALSE(ParseIntListOption("--batch", "8,-1", 1, 1024).ok());
  EXPECT_FALSE(ParseIntListOption("--batch", "", 1, 1024).ok());
}

TEST(OptionCheckTest, SweepCountThatWouldWrapIsAnError) {
  // 2^32 * 2^32 wraps to 0 in 64-bit arithmetic: "no rows" must be an error instead.
  auto r = CheckedCount({int64_t{1} << 32, int64_t{1} << 32}, int64_t{1} << 20, "sweep");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("sweep: more than 1048576 combinations"));
  EXPECT_EQ(*CheckedCount({2, 3, 4}, 100, "sweep"), 24);
  EXPECT_FALSE(CheckedCount({2, 0}, 100, "sweep").ok());
}

}  // namespace
}  // namespace memsim
