#include "sim/allocator/alloc_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace memsim {
namespace {

using ::testing::HasSubstr;

AllocatorConfig Conf(const char* s) {
  auto r = ParseAllocConf(s);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : AllocatorConfig{};
}

std::string Error(const char* s) {
  auto r = ParseAllocConf(s);
  EXPECT_FALSE(r.ok()) << "accepted: " << s;
  return r.ok() ? "" : r.status().message();
}

TEST(AllocConfigTest, EmptyStringIsDefault) {
  AllocatorConfig c = Conf("");
  EXPECT_EQ(c.max_split_size, kUnlimitedSplitSize);
  EXPECT_EQ(c.max_non_split_rounding_size, 20 * kMiB);
  EXPECT_FALSE(c.expandable_segments);
  for (int64_t d : c.roundup_power2_divisions) EXPECT_EQ(d, 0);
  EXPECT_EQ(c.ToString(), "");
}

TEST(AllocConfigTest, ParsesTheFullExampleString) {
  AllocatorConfig c = Conf(
      "expandable_segments:True,max_split_size_mb:128,"
      "roundup_power2_divisions:[256:1,512:2,>:4],garbage_collection_threshold:0.6");
  EXPECT_TRUE(c.expandable_segments);
  EXPECT_EQ(c.max_split_size, 128 * kMiB);
  EXPECT_DOUBLE_EQ(c.garbage_collection_threshold, 0.6);
  // 256 MiB -> entry 8; the first key back-fills entries 0..7; '>' fills after the last key.
  for (int k = 0; k <= 8; ++k) EXPECT_EQ(c.roundup_power2_divisions[k], 1) << k;
  EXPECT_EQ(c.roundup_power2_divisions[9], 2);
  for (int k = 10; k < kRoundupIntervals; ++k) EXPECT_EQ(c.roundup_power2_divisions[k], 4) << k;
}

TEST(AllocConfigTest, SpacesAreIgnoredAndSingleDivisionFillsAll) {
  AllocatorConfig c = Conf(" roundup_power2_divisions : 4 , max_non_split_rounding_mb:64 ");
  for (int64_t d : c.roundup_power2_divisions) EXPECT_EQ(d, 4);
  EXPECT_EQ(c.max_non_split_rounding_size, 64 * kMiB);
}

TEST(AllocConfigTest, ListWithoutGreaterLeavesTailAtZero) {
  AllocatorConfig c = Conf("roundup_power2_divisions:[4:2,64:8]");
  for (int k = 0; k <= 2; ++k) EXPECT_EQ(c.roundup_power2_divisions[k], 2) << k;
  for (int k = 3; k < 6; ++k) EXPECT_EQ(c.roundup_power2_divisions[k], 0) << k;
  EXPECT_EQ(c.roundup_power2_divisions[6], 8);
  for (int k = 7; k < kRoundupIntervals; ++k) EXPECT_EQ(c.roundup_power2_divisions[k], 0) << k;
}

TEST(AllocConfigTest, AcceptsKnownIgnoredOptions) {
  AllocatorConfig c = Conf(
      "backend:native,release_lock_on_cudamalloc:True,pinned_use_cuda_host_register:True,"
      "pinned_num_register_threads:8,expandable_segments:False");
  EXPECT_TRUE(c.release_lock_on_cudamalloc);
  EXPECT_EQ(c.pinned_num_register_threads, 8);
}

TEST(AllocConfigTest, RejectsBadStringsNamingKeyOrValue) {
  EXPECT_THAT(Error("foo:1"), HasSubstr("unknown option 'foo'"));
  EXPECT_THAT(Error("max_split_size_mb:10"), HasSubstr("max_split_size_mb"));
  EXPECT_THAT(Error("max_split_size_mb:10"), HasSubstr("'10'"));
  EXPECT_THAT(Error("max_split_size_mb:abc"), HasSubstr("'abc'"));
  EXPECT_THAT(Error("max_split_size_mb:-5"), HasSubstr("max_split_size_mb"));
  EXPECT_THAT(Error("max_split_size_mb"), HasSubstr("expected ':'"));
  EXPECT_THAT(Error("max_split_size_mb:"), HasSubstr("missing value"));
  EXPECT_THAT(Error("expandable_segments:yes"), HasSubstr("'yes'"));
  EXPECT_THAT(Error("garbage_collection_threshold:1.5"), HasSubstr("garbage_collection_threshold"));
  EXPECT_THAT(Error("garbage_collection_threshold:0"), HasSubstr("(0.0, 1.0)"));
  EXPECT_THAT(Error("roundup_power2_divisions:3"), HasSubstr("power of 2"));
  EXPECT_THAT(Error("roundup_power2_divisions:[256:3]"), HasSubstr("'3'"));
  EXPECT_THAT(Error("roundup_power2_divisions:[300:2]"), HasSubstr("'300'"));
  EXPECT_THAT(Error("roundup_power2_divisions:[256:2"), HasSubstr("missing ']'"));
  EXPECT_THAT(Error("backend:cudaMallocAsync"), HasSubstr("cudaMallocAsync"));
  EXPECT_THAT(Error("max_split_size_mb:128:4"), HasSubstr("unexpected ':'"));
  EXPECT_THAT(Error("max_non_split_rounding_mb:1"), HasSubstr("max_non_split_rounding_mb"));
}

TEST(AllocConfigTest, ToStringRoundTrips) {
  AllocatorConfig c = Conf(
      "expandable_segments:True,max_split_size_mb:128,"
      "roundup_power2_divisions:[256:1,512:2,>:4]");
  AllocatorConfig d = Conf(c.ToString().c_str());
  EXPECT_EQ(d.max_split_size, c.max_split_size);
  EXPECT_EQ(d.roundup_power2_divisions, c.roundup_power2_divisions);
  EXPECT_EQ(d.expandable_segments, c.expandable_segments);
}

// Note [Caching allocator rounding], R3.1 - R3.4.
TEST(RoundSizeTest, Plain512Rounding) {
  AllocatorConfig c;
  EXPECT_EQ(RoundSize(0, c), 512);
  EXPECT_EQ(RoundSize(1, c), 512);
  EXPECT_EQ(RoundSize(511, c), 512);
  EXPECT_EQ(RoundSize(512, c), 512);
  EXPECT_EQ(RoundSize(513, c), 1024);
  EXPECT_EQ(RoundSize(1000, c), 1024);
  EXPECT_EQ(RoundSize(1200, c), 1536);
  EXPECT_EQ(RoundSize(3 * kMiB + 1, c), 3 * kMiB + 512);
}

TEST(RoundSizeTest, PowerOfTwoDivisions) {
  AllocatorConfig c = Conf("roundup_power2_divisions:4");
  // n <= 512*d stays on 512 rounding (R3.2): 1200 <= 2048.
  EXPECT_EQ(RoundSize(1200, c), 1536);
  // 1.2 MiB: F = 1 MiB, step 256 KiB -> 1.25 MiB.
  EXPECT_EQ(RoundSize(1258291, c), 1310720);
  EXPECT_EQ(RoundSize(4 * kMiB, c), 4 * kMiB);      // powers of two stay
  EXPECT_EQ(RoundSize(5 * kMiB, c), 5 * kMiB);      // already on a step
  EXPECT_EQ(RoundSize(5 * kMiB + 1, c), 6 * kMiB);  // step 1 MiB in [4, 8) MiB
  // The same size without divisions.
  EXPECT_EQ(RoundSize(1258291, AllocatorConfig{}), 1258496);
}

TEST(RoundSizeTest, DivisionsOfOneMeanPlainRounding) {
  AllocatorConfig c = Conf("roundup_power2_divisions:1");
  EXPECT_EQ(RoundSize(1258291, c), 1258496);
}

TEST(RoundSizeTest, ListFormPicksTheIntervalOfTheSize) {
  AllocatorConfig c = Conf("roundup_power2_divisions:[256:1,512:2,>:4]");
  EXPECT_EQ(RoundSize(300 * kMiB + 1, c), 300 * kMiB + 512);  // entry 8: d = 1
  EXPECT_EQ(RoundSize(600 * kMiB + 1, c), 768 * kMiB);        // entry 9: d = 2
  EXPECT_EQ(RoundSize(2048 * kMiB + 1, c), 2560 * kMiB);      // entry 11: d = 4
  EXPECT_EQ(c.DivisionsFor(kMiB), 1);                         // below 2 MiB: entry 0
}

TEST(SegmentSizeTest, SmallLargeAndRoundedSegments) {
  AllocatorConfig c;
  EXPECT_EQ(SegmentSizeFor(512, c), 2 * kMiB);
  EXPECT_EQ(SegmentSizeFor(kMiB, c), 2 * kMiB);
  EXPECT_EQ(SegmentSizeFor(kMiB + 512, c), 20 * kMiB);
  EXPECT_EQ(SegmentSizeFor(10 * kMiB - 512, c), 20 * kMiB);
  EXPECT_EQ(SegmentSizeFor(10 * kMiB, c), 10 * kMiB);
  EXPECT_EQ(SegmentSizeFor(25 * kMiB, c), 26 * kMiB);
  EXPECT_EQ(SegmentSizeFor(26 * kMiB + 512, c), 28 * kMiB);
}

}  // namespace
}  // namespace memsim
