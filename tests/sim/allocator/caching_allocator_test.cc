#include "sim/allocator/caching_allocator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

namespace memsim {
namespace {

constexpr int64_t MiB = kMiB;

AllocatorConfig Conf(const char* s) {
  auto r = ParseAllocConf(s);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : AllocatorConfig{};
}

class CachingAllocatorTest : public ::testing::Test {
 protected:
  // The spec's worked examples model addresses as increasing per cudaMalloc.
  void Make(const AllocatorConfig& c = {}, int64_t capacity = 0,
            AddressOrder order = AddressOrder::kIncreasing) {
    a_ = std::make_unique<CachingAllocator>(c, DeviceOptions{capacity, order, 0});
  }
  BlockId M(int64_t n) {
    BlockId b = a_->Malloc(n);
    EXPECT_TRUE(a_->CheckInvariants().ok()) << a_->CheckInvariants().ToString();
    return b;
  }
  void F(BlockId b) {
    a_->Free(b);
    EXPECT_TRUE(a_->CheckInvariants().ok()) << a_->CheckInvariants().ToString();
  }
  int64_t Allocated() const { return a_->stats().allocated_bytes.all().current; }
  int64_t Reserved() const { return a_->stats().reserved_bytes.all().current; }
  int64_t SplitSmall() const { return a_->stats().inactive_split_bytes.small_pool().current; }
  int64_t SplitLarge() const { return a_->stats().inactive_split_bytes.large_pool().current; }
  std::unique_ptr<CachingAllocator> a_;
};

// caching_allocator.md, Example 1 (default config), every row.
TEST_F(CachingAllocatorTest, WorkedExample1DefaultConfig) {
  Make();
  BlockId A = M(1000);
  EXPECT_EQ(Allocated(), 1024);
  EXPECT_EQ(Reserved(), 2097152);
  EXPECT_EQ(SplitSmall(), 2096128);
  EXPECT_EQ(SplitLarge(), 0);
  BlockId B = M(3 * MiB);
  EXPECT_EQ(Allocated(), 3146752);
  EXPECT_EQ(Reserved(), 23068672);
  EXPECT_EQ(SplitLarge(), 17825792);
  BlockId C = M(15 * MiB);
  EXPECT_EQ(a_->BlockAddress(C), a_->BlockAddress(B) + 3 * MiB);
  EXPECT_EQ(Allocated(), 18875392);
  EXPECT_EQ(Reserved(), 23068672);
  EXPECT_EQ(SplitLarge(), 2097152);
  BlockId D = M(2621440);
  EXPECT_EQ(Allocated(), 21496832);
  EXPECT_EQ(Reserved(), 44040192);
  EXPECT_EQ(SplitLarge(), 20447232);
  F(B);
  EXPECT_EQ(Allocated(), 18351104);
  EXPECT_EQ(SplitLarge(), 23592960);
  F(C);
  EXPECT_EQ(Allocated(), 2622464);
  EXPECT_EQ(SplitLarge(), 18350080);
  BlockId E = M(25 * MiB);
  EXPECT_EQ(a_->BlockSize(E), 26 * MiB);  // rem = 1 MiB exactly: not split
  EXPECT_EQ(Allocated(), 29885440);
  EXPECT_EQ(Reserved(), 71303168);
  BlockId Fb = M(20447232);  // 19.5 MiB
  EXPECT_EQ(a_->BlockSize(Fb), 20 * MiB);
  EXPECT_EQ(a_->BlockAddress(Fb), a_->BlockAddress(B));  // S2, whole
  EXPECT_EQ(Allocated(), 50856960);
  F(E);
  F(Fb);
  EXPECT_EQ(Allocated(), 2622464);
  EXPECT_EQ(Reserved(), 71303168);
  EXPECT_EQ(SplitSmall(), 2096128);
  EXPECT_EQ(SplitLarge(), 18350080);
  a_->EmptyCache();
  EXPECT_EQ(Reserved(), 23068672);
  EXPECT_EQ(a_->stats().segment.all().current, 2);
  EXPECT_EQ(a_->stats().allocated_bytes.all().peak, 50856960);
  EXPECT_EQ(a_->stats().reserved_bytes.all().peak, 71303168);
  EXPECT_EQ(a_->stats().num_device_free, 2);
  EXPECT_TRUE(a_->CheckInvariants().ok());
  (void)A;
  (void)D;
}

// Example 2: max_split_size_mb:100, oversize rules A and B.
TEST_F(CachingAllocatorTest, WorkedExample2OversizeRules) {
  Make(Conf("max_split_size_mb:100"));
  BlockId X = M(200 * MiB);
  EXPECT_EQ(Reserved(), 200 * MiB);
  EXPECT_EQ(a_->stats().oversize_segments.current, 1);
  EXPECT_EQ(a_->stats().oversize_allocations.current, 1);
  F(X);
  BlockId Y = M(150 * MiB);  // 200 >= 150 + 20: rule B miss
  EXPECT_EQ(Reserved(), 350 * MiB);
  EXPECT_NE(a_->BlockAddress(Y), a_->BlockAddress(X));
  F(Y);
  BlockId Z = M(185 * MiB);  // 200 < 185 + 20: hit, whole block
  EXPECT_EQ(a_->BlockSize(Z), 200 * MiB);
  EXPECT_EQ(Allocated(), 200 * MiB);
  EXPECT_EQ(Reserved(), 350 * MiB);
  BlockId W = M(50 * MiB);  // rule A: 150 MiB cached block is oversize
  EXPECT_EQ(Allocated(), 250 * MiB);
  EXPECT_EQ(Reserved(), 400 * MiB);
  (void)W;
}

TEST_F(CachingAllocatorTest, MaxNonSplitRoundingWidensOversizeReuse) {
  Make(Conf("max_split_size_mb:100,max_non_split_rounding_mb:64"));
  BlockId X = M(200 * MiB);
  const uint64_t x = a_->BlockAddress(X);
  F(X);
  BlockId Y = M(150 * MiB);  // 200 < 150 + 64: reused whole
  EXPECT_EQ(a_->BlockAddress(Y), x);
  EXPECT_EQ(a_->BlockSize(Y), 200 * MiB);
  EXPECT_EQ(Reserved(), 200 * MiB);
}

// Example 2 footnote: R7.4 releases the smallest oversize block >= max(s, max_split).
TEST_F(CachingAllocatorTest, ReleaseAvailableCachedBlocksFreesOneOversizeBlock) {
  Make(Conf("max_split_size_mb:100"), 350 * MiB);
  BlockId X = M(200 * MiB);
  F(X);
  BlockId Y = M(150 * MiB);
  F(Y);
  BlockId Z = M(185 * MiB);
  ASSERT_NE(Z, kNoBlock);
  BlockId W = M(50 * MiB);
  ASSERT_NE(W, kNoBlock);
  EXPECT_EQ(Reserved(), 250 * MiB);  // 150 MiB released, 50 MiB mapped
  EXPECT_EQ(a_->stats().num_alloc_retries, 0);
  EXPECT_EQ(a_->stats().num_ooms, 0);
}

TEST_F(CachingAllocatorTest, ReleaseAvailableCachedBlocksWalksDownFromLargest) {
  Make(Conf("max_split_size_mb:100"), 400 * MiB);
  BlockId b1 = M(120 * MiB), b2 = M(130 * MiB), b3 = M(140 * MiB);
  F(b1);
  F(b2);
  F(b3);
  EXPECT_EQ(Reserved(), 390 * MiB);
  BlockId big = M(300 * MiB);  // K = 300: no single block; 140 + 130 + 120 >= 300
  ASSERT_NE(big, kNoBlock);
  EXPECT_EQ(Reserved(), 300 * MiB);
  EXPECT_EQ(a_->stats().num_alloc_retries, 0);
}

// Example 3: small-pool packing and lowest-address tie-break.
TEST_F(CachingAllocatorTest, WorkedExample3SmallPoolTieBreak) {
  Make();
  BlockId b0 = M(716800), b1 = M(716800), b2 = M(716800);
  EXPECT_EQ(a_->BlockAddress(b1), a_->BlockAddress(b0) + 716800);
  EXPECT_NE(a_->BlockAddress(b2), a_->BlockAddress(b0) + 2 * 716800);  // new segment S2
  EXPECT_EQ(Allocated(), 2150400);
  EXPECT_EQ(Reserved(), 4194304);
  EXPECT_EQ(SplitSmall(), 2043904);
  F(b1);
  BlockId c = M(600000);
  EXPECT_EQ(a_->BlockAddress(c), a_->BlockAddress(b0) + 716800);  // S1 has the lower address
  EXPECT_EQ(Allocated(), 2033664);
  EXPECT_EQ(Reserved(), 4194304);
  (void)b2;
}

TEST_F(CachingAllocatorTest, TieBreakFollowsAddressModel) {
  Make({}, 0, AddressOrder::kDecreasing);  // S2 below S1: S2 wins the tie
  BlockId b0 = M(716800), b1 = M(716800), b2 = M(716800);
  F(b1);
  BlockId c = M(600000);
  EXPECT_EQ(a_->BlockAddress(c), a_->BlockAddress(b2) + 716800);
  (void)b0;
}

// Example 5: first matmul and the cuBLAS workspace.
TEST_F(CachingAllocatorTest, WorkedExample5CublasWorkspace) {
  Make();
  M(4 * MiB);
  M(4 * MiB);
  M(4 * MiB);
  M(8519680);
  EXPECT_EQ(Allocated(), 21102592);
  EXPECT_EQ(Reserved(), 41943040);
  EXPECT_EQ(SplitLarge(), 8 * MiB + 12451840);
  Make();
  M(4 * MiB);
  M(4 * MiB);
  M(4 * MiB);
  M(32 * MiB);
  EXPECT_EQ(Allocated(), 46137344);
  EXPECT_EQ(Reserved(), 54525952);
}

TEST_F(CachingAllocatorTest, RequestOfExactly1MiBGoesToSmallPool) {
  Make();
  M(MiB);
  EXPECT_EQ(a_->stats().reserved_bytes.small_pool().current, 2 * MiB);
  M(MiB + 1);
  EXPECT_EQ(a_->stats().reserved_bytes.large_pool().current, 20 * MiB);
}

TEST_F(CachingAllocatorTest, SmallPoolSplitsRemainderOf512) {
  Make();
  M(MiB);
  BlockId b = M(MiB - 512);
  EXPECT_EQ(Reserved(), 2 * MiB);
  EXPECT_EQ(a_->BlockSize(b), MiB - 512);
  EXPECT_EQ(SplitSmall(), 512);
  EXPECT_EQ(a_->stats().inactive_split.small_pool().current, 1);
}

TEST_F(CachingAllocatorTest, LargePoolSplitsOnlyAboveOneMiB) {
  Make();
  BlockId b = M(20 * MiB - (MiB + 512));  // rem = 1 MiB + 512 > 1 MiB: split
  EXPECT_EQ(a_->BlockSize(b), 20 * MiB - MiB - 512);
  EXPECT_EQ(SplitLarge(), MiB + 512);
  Make();
  BlockId c = M(19 * MiB);  // >= 10 MiB: segment rounded to 20 MiB; rem = 1 MiB: whole
  EXPECT_EQ(Reserved(), 20 * MiB);
  EXPECT_EQ(a_->BlockSize(c), 20 * MiB);
  EXPECT_EQ(Allocated(), 20 * MiB);
  EXPECT_EQ(a_->unsplit_waste_bytes(), MiB);
}

TEST_F(CachingAllocatorTest, MidSizeRequestsGet20MiBSegmentsAndBigOnesRoundTo2MiB) {
  Make();
  M(9 * MiB);
  EXPECT_EQ(Reserved(), 20 * MiB);
  M(11 * MiB + 1);
  EXPECT_EQ(Reserved(), 32 * MiB);
}

TEST_F(CachingAllocatorTest, BestFitPicksSmallestSufficientBlock) {
  Make();
  BlockId s12 = M(12 * MiB), s14 = M(14 * MiB), s18 = M(18 * MiB);
  const uint64_t a12 = a_->BlockAddress(s12), a14 = a_->BlockAddress(s14);
  F(s14);
  F(s18);
  F(s12);
  BlockId x = M(11 * MiB);  // fits 12 best (not 14 or 18); rem 1 MiB: handed out whole
  EXPECT_EQ(a_->BlockAddress(x), a12);
  EXPECT_EQ(a_->BlockSize(x), 12 * MiB);
  BlockId y = M(13 * MiB);
  EXPECT_EQ(a_->BlockAddress(y), a14);
  EXPECT_EQ(Reserved(), 44 * MiB);
}

TEST_F(CachingAllocatorTest, StreamsDoNotShareCachedBlocks) {
  Make();
  BlockId b = a_->Malloc(3 * MiB, /*stream=*/1);
  const uint64_t addr = a_->BlockAddress(b);
  a_->Free(b);
  BlockId c = a_->Malloc(3 * MiB, /*stream=*/2);
  EXPECT_EQ(Reserved(), 40 * MiB);
  BlockId d = a_->Malloc(3 * MiB, /*stream=*/1);
  EXPECT_EQ(a_->BlockAddress(d), addr);
  EXPECT_EQ(Reserved(), 40 * MiB);
  (void)c;
}

TEST_F(CachingAllocatorTest, NoMergeAcrossAdjacentSegments) {
  Make();  // increasing bump: S2 starts exactly where S1 ends
  BlockId a = M(12 * MiB), b = M(12 * MiB);
  ASSERT_EQ(a_->BlockAddress(b), a_->BlockAddress(a) + 12 * MiB);
  F(a);
  F(b);
  auto snap = a_->Snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].blocks.size(), 1u);
  BlockId c = M(20 * MiB);  // cannot use the two 12 MiB blocks together
  EXPECT_EQ(Reserved(), 44 * MiB);
  (void)c;
}

TEST_F(CachingAllocatorTest, FreeMergesPrevAndNextAndKeepsReserved) {
  Make();
  BlockId a = M(3 * MiB), b = M(3 * MiB), c = M(3 * MiB);
  F(a);
  F(c);
  EXPECT_EQ(a_->stats().inactive_split.large_pool().current, 2);
  F(b);
  EXPECT_EQ(a_->stats().inactive_split.large_pool().current, 0);
  EXPECT_EQ(SplitLarge(), 0);
  EXPECT_EQ(Reserved(), 20 * MiB);
  EXPECT_EQ(a_->LargestFreeBlock(), 20 * MiB);
}

TEST_F(CachingAllocatorTest, EmptyCacheKeepsSplitSegmentsAndPeaks) {
  Make();
  BlockId a = M(3 * MiB), b = M(3 * MiB);
  F(a);
  a_->EmptyCache();
  EXPECT_EQ(Reserved(), 20 * MiB);
  F(b);
  a_->EmptyCache();
  EXPECT_EQ(Reserved(), 0);
  EXPECT_EQ(a_->stats().reserved_bytes.all().peak, 20 * MiB);
  EXPECT_EQ(a_->stats().segment.all().current, 0);
}

TEST_F(CachingAllocatorTest, OomLadderFreesCacheAndRetries) {
  Make({}, 40 * MiB);
  BlockId a = M(3 * MiB);
  F(a);                     // cached 20 MiB unsplit segment
  BlockId b = M(25 * MiB);  // needs 26 MiB: 20 + 26 > 40 -> empty cache, retry
  ASSERT_NE(b, kNoBlock);
  EXPECT_EQ(a_->stats().num_alloc_retries, 1);
  EXPECT_EQ(a_->stats().num_ooms, 0);
  EXPECT_EQ(Reserved(), 26 * MiB);
  EXPECT_EQ(a_->stats().reserved_bytes.all().peak, 26 * MiB);
}

TEST_F(CachingAllocatorTest, OomIsAResultWithPyTorchNumbers) {
  Make({}, 30 * MiB);
  BlockId a = M(25 * MiB);
  BlockId small = M(1000);  // 2 MiB small segment, split
  ASSERT_NE(small, kNoBlock);
  BlockId b = M(5 * MiB);  // 20 MiB segment: 28 + 20 > 30
  EXPECT_EQ(b, kNoBlock);
  EXPECT_EQ(a_->stats().num_ooms, 1);
  EXPECT_EQ(a_->stats().num_alloc_retries, 1);
  ASSERT_TRUE(a_->last_oom().has_value());
  const OomInfo& o = *a_->last_oom();
  EXPECT_EQ(o.requested_bytes, 5 * MiB);
  EXPECT_EQ(o.tried_to_allocate_bytes, 20 * MiB);
  EXPECT_EQ(o.capacity_bytes, 30 * MiB);
  EXPECT_EQ(o.reserved_bytes, 28 * MiB);
  EXPECT_EQ(o.allocated_bytes, 26 * MiB + 1024);
  EXPECT_EQ(o.reserved_unallocated_bytes, 2 * MiB - 1024);
  EXPECT_EQ(o.free_bytes, 2 * MiB);
  EXPECT_THAT(o.message, ::testing::HasSubstr("Tried to allocate 20.00 MiB"));
  EXPECT_THAT(o.message, ::testing::HasSubstr("reserved by PyTorch but unallocated"));
  EXPECT_TRUE(a_->CheckInvariants().ok());
  (void)a;
}

TEST_F(CachingAllocatorTest, GarbageCollectionReleasesOldestCachedSegments) {
  // limit = 0.5 * 100 MiB = 50 MiB; GC threshold 0.6 * 50 = 30 MiB.
  Make(Conf("garbage_collection_threshold:0.6,per_process_memory_fraction:0.5"), 100 * MiB);
  BlockId x = M(12 * MiB);
  F(x);  // age base 1
  BlockId y = M(14 * MiB), w = M(16 * MiB);
  F(y);
  F(w);  // age base 3
  EXPECT_EQ(Reserved(), 42 * MiB);
  BlockId z = M(18 * MiB);  // miss; GC: ages 3,1,1, mean 5/3: releases X (12 MiB) only
  ASSERT_NE(z, kNoBlock);
  EXPECT_EQ(Reserved(), 48 * MiB);
  EXPECT_EQ(a_->stats().num_alloc_retries, 0);
  // Without a fraction GC is off.
  Make(Conf("garbage_collection_threshold:0.6"), 100 * MiB);
  x = M(12 * MiB);
  F(x);
  y = M(14 * MiB);
  w = M(16 * MiB);
  F(y);
  F(w);
  M(18 * MiB);
  EXPECT_EQ(Reserved(), 60 * MiB);
}

TEST_F(CachingAllocatorTest, FractionLimitTriggersLadderWithoutDeviceCall) {
  Make(Conf("per_process_memory_fraction:0.5"), 100 * MiB);  // limit 50 MiB
  BlockId a = M(40 * MiB);
  F(a);
  BlockId b = M(45 * MiB);  // 40 + 46 > 50: empty cache, retry
  ASSERT_NE(b, kNoBlock);
  EXPECT_EQ(Reserved(), 46 * MiB);
  EXPECT_EQ(a_->stats().num_alloc_retries, 1);
}

TEST_F(CachingAllocatorTest, RoundingAndUnsplitWasteAreTracked) {
  Make();
  BlockId a = M(1000);
  EXPECT_EQ(a_->rounding_waste_bytes(), 24);
  BlockId b = M(25 * MiB);
  EXPECT_EQ(a_->unsplit_waste_bytes(), MiB);
  EXPECT_EQ(a_->stats().requested_bytes.all().current, 1000 + 25 * MiB);
  F(a);
  F(b);
  EXPECT_EQ(a_->rounding_waste_bytes(), 0);
  EXPECT_EQ(a_->unsplit_waste_bytes(), 0);
  EXPECT_EQ(a_->stats().requested_bytes.all().current, 0);
}

TEST_F(CachingAllocatorTest, ImportSegmentBuildsState) {
  Make();
  ImportedSegment s;
  s.address = 1 << 30;
  s.size = 20 * MiB;
  s.pool = PoolKind::kLarge;
  s.blocks = {{s.address, 4 * MiB, 4000000, true},
              {s.address + 4 * MiB, 10 * MiB, 0, false},
              {s.address + 14 * MiB, 6 * MiB, 6 * MiB, true}};
  auto ids = a_->ImportSegment(s);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  ASSERT_EQ(ids->size(), 2u);
  EXPECT_TRUE(a_->CheckInvariants().ok());
  EXPECT_EQ(SplitLarge(), 10 * MiB);
  BlockId b = M(9 * MiB);
  EXPECT_EQ(a_->BlockAddress(b), s.address + 4 * MiB);
  F((*ids)[0]);
  F((*ids)[1]);
  F(b);
  EXPECT_EQ(a_->LargestFreeBlock(), 20 * MiB);
  // Bad tilings are rejected.
  s.blocks.pop_back();
  EXPECT_FALSE(a_->ImportSegment(s).ok());
}

// Randomized: invariants and stats identities hold under any sequence (fixed seed).
TEST_F(CachingAllocatorTest, RandomizedInvariants) {
  for (const char* conf :
       {"", "max_split_size_mb:40", "roundup_power2_divisions:4", "expandable_segments:True"}) {
    Make(Conf(conf), 2048 * MiB);
    std::mt19937_64 rng(301);
    std::vector<BlockId> live;
    for (int i = 0; i < 3000; ++i) {
      if (live.empty() || rng() % 100 < 55) {
        int64_t n = rng() % 4 == 0 ? 1 + rng() % (64 * MiB) : 1 + rng() % (2 * MiB);
        BlockId b = a_->Malloc(n, rng() % 8 == 0 ? 7 : 0);
        if (b != kNoBlock) live.push_back(b);
      } else {
        size_t k = rng() % live.size();
        a_->Free(live[k]);
        live[k] = live.back();
        live.pop_back();
      }
      if (i % 500 == 0) a_->EmptyCache();
      Status st = a_->CheckInvariants();
      ASSERT_TRUE(st.ok()) << conf << " step " << i << ": " << st.ToString();
    }
    for (BlockId b : live) a_->Free(b);
    EXPECT_EQ(Allocated(), 0);
    a_->EmptyCache();
    EXPECT_EQ(Reserved(), 0) << conf;
    EXPECT_TRUE(a_->CheckInvariants().ok());
  }
}

}  // namespace
}  // namespace memsim
