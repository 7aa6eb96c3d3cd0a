// Byte totals near 2^63: every size is range-checked and every sum bounded before a model runs,
// so no allocator statistic, arena offset or rounding can overflow (regressions of the abort in
// allocator_stats.h / ideal_packing.cc and of replayed sizes that rounded to 2 MiB).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/allocator/alloc_config.h"
#include "sim/allocator/simulate.h"

namespace memsim {
namespace {

using ::testing::HasSubstr;

EventStream OneBuffer(int64_t bytes, int copies = 1) {
  EventStream es;
  for (int k = 0; k < copies; ++k) {
    es.buffers.push_back(Buffer{"big" + std::to_string(k), bytes, Category::kActivation, 0, ""});
    es.events.push_back(MemEvent{EventKind::kAlloc, Phase::kForward, static_cast<uint32_t>(k), 0});
  }
  return es;
}

TEST(ByteBudgetTest, TensorOf2To62BytesIsAnErrorNamingIt) {
  for (AllocatorModel m : {AllocatorModel::kCaching, AllocatorModel::kExpandable, AllocatorModel::kIdeal}) {
    AllocatorOptions opt;
    opt.model = m;
    auto r = SimulateAllocator(OneBuffer(int64_t{1} << 62), opt);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.status().message(), HasSubstr("tensor \"big0\": 4611686018427387904 bytes"));
  }
}

TEST(ByteBudgetTest, SumOfRequestsBeyond2To62IsAnError) {
  AllocatorOptions opt;
  auto r = SimulateAllocator(OneBuffer(kMaxRequestBytes, 4096), opt);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("exceed 2^62"));
}

TEST(ByteBudgetTest, LargestRequestStillSimulates) {
  AllocatorOptions opt;
  auto r = SimulateAllocator(OneBuffer(kMaxRequestBytes, 2), opt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GE(r->peak_reserved_bytes, 2 * kMaxRequestBytes);
  EXPECT_GE(r->ideal_peak_bytes, 2 * kMaxRequestBytes);
}

TEST(ByteBudgetTest, NegativeSizeIsAnError) {
  ByteBudget b{AllocatorConfig{}};
  Status s = b.Add(-1, "x");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("x: negative size"));
}

TEST(RoundSizeOverflowTest, HugeDivisionCountDoesNotOverflow) {
  auto c = ParseAllocConf("roundup_power2_divisions:4611686018427387904");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(RoundSize(3 * kMiB + 1, *c), 3 * kMiB + 512);
  EXPECT_EQ(RoundSize(kMaxRequestBytes, *c), kMaxRequestBytes);
  EXPECT_GE(RoundSize(kMaxRequestBytes - 1, *c), kMaxRequestBytes - 1);
}

TEST(AllocConfRobustnessTest, SpaceInsideAValueIsNotReadAsOneNumber) {
  auto c = ParseAllocConf("roundup_power2_divisions:[1:4 2:8]");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("unexpected space after '4'"));
  EXPECT_THAT(c.status().message(), ::testing::Not(HasSubstr("'42'")));
  EXPECT_TRUE(ParseAllocConf(" roundup_power2_divisions : [ 1:4 , 2:8 ] ").ok());
}

TEST(AllocConfRobustnessTest, LongGarbageIsQuotedAsAnExcerpt) {
  auto c = ParseAllocConf("max_split_size_mb:" + std::string(100000, '9'));
  ASSERT_FALSE(c.ok());
  EXPECT_LT(c.status().message().size(), 400u);
}

}  // namespace
}  // namespace memsim
