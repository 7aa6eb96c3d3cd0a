// lib/util/option_check: option values are parsed and range-checked, errors name the option.
#include "lib/util/option_check.h"

#include "lib/util/checked.h"

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

TEST(BytesOptionTest, PlainBytesAndDecimalAndBinaryUnits) {
  EXPECT_EQ(*ParseBytesOption("--capacity", "1000", kMaxTensorBytes), 1000);
  EXPECT_EQ(*ParseBytesOption("--capacity", "24GB", kMaxTensorBytes), 24000000000);
  EXPECT_EQ(*ParseBytesOption("--capacity", "24gb", kMaxTensorBytes), 24000000000);
  EXPECT_EQ(*ParseBytesOption("--capacity", "80GiB", kMaxTensorBytes), int64_t{80} << 30);
  EXPECT_EQ(*ParseBytesOption("--capacity", "1.5 GiB", kMaxTensorBytes), int64_t{3} << 29);
  EXPECT_EQ(*ParseBytesOption("--capacity", "512MiB", kMaxTensorBytes), int64_t{512} << 20);
  EXPECT_EQ(*ParseBytesOption("--capacity", "2TB", kMaxTensorBytes), int64_t{2000000000000});
}

TEST(BytesOptionTest, BadSizesNameTheOptionAndTheForms) {
  for (const char* bad : {"24XB", "GB", "", "-5GB", "1.2.3GB", "ten"}) {
    auto r = ParseBytesOption("--capacity", bad, kMaxTensorBytes);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("--capacity")) << bad;
  }
  EXPECT_THAT(ParseBytesOption("--capacity", "24XB", kMaxTensorBytes).status().message(), HasSubstr("80GiB"));
  EXPECT_THAT(ParseBytesOption("--capacity", "2000TiB", kMaxTensorBytes).status().message(), HasSubstr("more than"));
  EXPECT_FALSE(ParseBytesOption("--capacity", "99999999999999999999", kMaxTensorBytes).ok());
}

TEST(OptionCheckTest, ShardIsDigitsSlashDigitsWithinTheCountLimit) {
  auto ok = ParseShardOption("--shard", "2/8");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, (std::pair<int64_t, int64_t>{2, 8}));
  auto err = [](const char* t) {
    auto r = ParseShardOption("--shard", t);
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_THAT(err("+1/2"), HasSubstr("'+1/2' is not K/N"));
  EXPECT_THAT(err("-1/2"), HasSubstr("is not K/N"));
  EXPECT_THAT(err("1/ 2"), HasSubstr("is not K/N"));
  EXPECT_THAT(err("1/2/3"), HasSubstr("is not K/N"));
  EXPECT_THAT(err("3/2"), HasSubstr("'3' is out of range [1, 2]"));
  EXPECT_THAT(err("0/2"), HasSubstr("'0' is out of range [1, 2]"));
  EXPECT_THAT(err("1/99999999999999999999"), HasSubstr("does not fit in 64 bits"));  // never saturated
  EXPECT_THAT(err("1/1000001"), HasSubstr("out of range [1, 1000000]"));
}

}  // namespace
}  // namespace memsim
