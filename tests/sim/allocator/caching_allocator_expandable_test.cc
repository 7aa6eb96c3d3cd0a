#include <gtest/gtest.h>

#include "sim/allocator/caching_allocator.h"

namespace memsim {
namespace {

constexpr int64_t MiB = kMiB;

class ExpandableSegmentsTest : public ::testing::Test {
 protected:
  ExpandableSegmentsTest() { Make(0); }
  void Make(int64_t capacity) {
    AllocatorConfig c;
    c.expandable_segments = true;
    a_ = std::make_unique<CachingAllocator>(
        c, DeviceOptions{capacity, AddressOrder::kIncreasing, int64_t{16} << 30});
  }
  BlockId M(int64_t n) {
    BlockId b = a_->Malloc(n);
    Status st = a_->CheckInvariants();
    EXPECT_TRUE(st.ok()) << st.ToString();
    return b;
  }
  void F(BlockId b) {
    a_->Free(b);
    Status st = a_->CheckInvariants();
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  int64_t Reserved() const { return a_->stats().reserved_bytes.all().current; }
  std::unique_ptr<CachingAllocator> a_;
};

// caching_allocator.md, Example 4, every row.
TEST_F(ExpandableSegmentsTest, WorkedExample4) {
  BlockId A = M(3 * MiB);
  const uint64_t E = a_->BlockAddress(A);
  EXPECT_EQ(Reserved(), 20 * MiB);
  BlockId B = M(30 * MiB);  // grows the tail by one page, starting at free [3, 20)
  EXPECT_EQ(a_->BlockAddress(B), E + 3 * MiB);
  EXPECT_EQ(Reserved(), 40 * MiB);
  BlockId C = M(5 * MiB);
  EXPECT_EQ(a_->BlockAddress(C), E + 33 * MiB);
  EXPECT_EQ(Reserved(), 40 * MiB);
  F(A);
  F(B);
  a_->EmptyCache();  // unmaps page [0, 20) only
  EXPECT_EQ(Reserved(), 20 * MiB);
  auto snap = a_->Snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_TRUE(snap[0].expandable);
  EXPECT_EQ(snap[0].address, E + 20 * MiB);
  EXPECT_EQ(snap[0].total_size, 20 * MiB);
  ASSERT_EQ(snap[0].blocks.size(), 3u);
  EXPECT_EQ(snap[0].blocks[0].size, 13 * MiB);
  EXPECT_FALSE(snap[0].blocks[0].allocated);
  EXPECT_EQ(snap[0].blocks[1].size, 5 * MiB);
  EXPECT_TRUE(snap[0].blocks[1].allocated);
  EXPECT_EQ(snap[0].blocks[2].size, 2 * MiB);
  BlockId G = M(25 * MiB);  // lowest unmapped hole [0, 20) + free [20, 33)
  EXPECT_EQ(a_->BlockAddress(G), E);
  EXPECT_EQ(Reserved(), 40 * MiB);
  // Segment counts are untouched by maps (R11.6); maps are device calls.
  EXPECT_EQ(a_->stats().segment.all().current, 0);
  EXPECT_EQ(a_->stats().num_device_alloc, 3);
  EXPECT_EQ(a_->stats().num_device_free, 1);
  EXPECT_EQ(a_->stats().inactive_split_bytes.all().current, 0);
  (void)C;
}

TEST_F(ExpandableSegmentsTest, SameSequenceWithoutExpandableReservesMore) {
  CachingAllocator a({}, DeviceOptions{0, AddressOrder::kIncreasing, 0});
  BlockId A = a.Malloc(3 * MiB), B = a.Malloc(30 * MiB), C = a.Malloc(5 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes.all().current, 50 * MiB);
  a.Free(A);
  a.Free(B);
  a.EmptyCache();
  EXPECT_EQ(a.stats().reserved_bytes.all().current, 20 * MiB);
  a.Malloc(25 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes.all().current, 46 * MiB);
  (void)C;
}

TEST_F(ExpandableSegmentsTest, LookupPrefersInteriorBlockOverGrowableTail) {
  BlockId A = M(2 * MiB);
  const uint64_t E = a_->BlockAddress(A);
  BlockId I = M(8 * MiB);
  BlockId Y = M(5 * MiB);  // tail free [15, 20) can grow into the unmapped range
  F(I);                    // interior free [2, 10), 8 MiB
  BlockId x = M(4 * MiB);  // smallest is the 5 MiB tail, but its xsize is huge
  EXPECT_EQ(a_->BlockAddress(x), E + 2 * MiB);
  (void)Y;
}

TEST_F(ExpandableSegmentsTest, SplitsAnyRemainderInBothPools) {
  BlockId a = M(20447232);  // 19.5 MiB in a 20 MiB page: remainder 512 KiB is split off
  EXPECT_EQ(a_->BlockSize(a), 20447232);
  EXPECT_EQ(a_->stats().allocated_bytes.all().current, 20447232);
  BlockId s = M(1000);  // small pool: its own 2 MiB pages
  EXPECT_EQ(a_->BlockSize(s), 1024);
  EXPECT_EQ(a_->stats().reserved_bytes.small_pool().current, 2 * MiB);
}

TEST_F(ExpandableSegmentsTest, MapsOnlyWhatFitsTheCapacity) {
  Make(40 * MiB);
  BlockId a = M(30 * MiB);  // 2 pages
  EXPECT_EQ(Reserved(), 40 * MiB);
  BlockId b = M(3 * MiB);  // fits the 10 MiB tail
  ASSERT_NE(b, kNoBlock);
  BlockId c = M(10 * MiB);  // would need another page: OOM
  EXPECT_EQ(c, kNoBlock);
  EXPECT_EQ(a_->stats().num_ooms, 1);
  F(a);
  BlockId d = M(35 * MiB);  // the freed 30 MiB + nothing more: no page left -> OOM
  EXPECT_EQ(d, kNoBlock);
  BlockId e = M(25 * MiB);
  ASSERT_NE(e, kNoBlock);
  EXPECT_LE(Reserved(), 40 * MiB);
}

TEST_F(ExpandableSegmentsTest, EmptyCacheReleasesEverythingWhenAllFree) {
  BlockId a = M(50 * MiB), b = M(1000);
  F(a);
  F(b);
  a_->EmptyCache();
  EXPECT_EQ(Reserved(), 0);
  BlockId c = M(3 * MiB);
  EXPECT_EQ(Reserved(), 20 * MiB);
  (void)c;
}

}  // namespace
}  // namespace memsim
