#include "sim/allocator/simulate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "lib/analysis/peak.h"

namespace memsim {
namespace {

constexpr int64_t MiB = kMiB;

// A tiny builder: A(bytes) allocates a new buffer, F(i) frees buffer i.
struct StreamBuilder {
  EventStream es;
  uint32_t A(int64_t bytes, uint32_t op = 0) {
    const uint32_t id = static_cast<uint32_t>(es.buffers.size());
    es.buffers.push_back(Buffer{"b" + std::to_string(id), bytes, Category::kActivation, op, ""});
    es.events.push_back(MemEvent{EventKind::kAlloc, Phase::kForward, id, op});
    return id;
  }
  void F(uint32_t id) {
    es.events.push_back(MemEvent{EventKind::kFree, Phase::kForward, id, kNoOp});
  }
};

TEST(SimulateAllocatorTest, CachingModelMatchesExample1Peaks) {
  StreamBuilder s;
  uint32_t A = s.A(1000), B = s.A(3 * MiB), C = s.A(15 * MiB), D = s.A(2621440);
  s.F(B);
  s.F(C);
  uint32_t E = s.A(25 * MiB), F = s.A(20447232);
  s.F(E);
  s.F(F);
  AllocatorOptions opt;
  opt.address_order = AddressOrder::kIncreasing;
  auto r = SimulateAllocator(s.es, opt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->peak_allocated_bytes, 50856960);
  EXPECT_EQ(r->peak_reserved_bytes, 71303168);
  EXPECT_FALSE(r->oom.has_value());
  EXPECT_EQ(r->events_simulated, 10);
  // Fragmentation at the reserved peak (after E): E has 1 MiB unsplit slack.
  EXPECT_EQ(r->fragmentation.event_index, 6);
  EXPECT_EQ(r->fragmentation.internal_unsplit_bytes, MiB);
  EXPECT_EQ(r->fragmentation.internal_rounding_bytes, 24);
  EXPECT_EQ(r->fragmentation.external_bytes, 71303168 - 29885440);
  EXPECT_LE(r->ideal_peak_bytes, r->peak_reserved_bytes);
  EXPECT_GE(r->ideal_peak_bytes, r->peak_requested_bytes);
  (void)A;
  (void)D;
}

TEST(SimulateAllocatorTest, ExpandableAndIdealModelsReserveLess) {
  StreamBuilder s;
  uint32_t a = s.A(3 * MiB), b = s.A(30 * MiB);
  s.A(5 * MiB);
  s.F(a);
  s.F(b);
  s.A(25 * MiB);
  AllocatorOptions opt;
  auto caching = SimulateAllocator(s.es, opt);
  opt.model = AllocatorModel::kExpandable;
  auto exp = SimulateAllocator(s.es, opt);
  opt.model = AllocatorModel::kIdeal;
  auto ideal = SimulateAllocator(s.es, opt);
  ASSERT_TRUE(caching.ok() && exp.ok() && ideal.ok());
  EXPECT_EQ(caching->peak_reserved_bytes, 50 * MiB);  // 20 + 30; the 25 MiB reuses the 30
  EXPECT_EQ(exp->peak_reserved_bytes, 40 * MiB);
  EXPECT_EQ(exp->alloc_conf, "expandable_segments:True");
  EXPECT_EQ(ideal->peak_reserved_bytes, 38 * MiB);  // 3 + 30 + 5, then 25 fits the 33 MiB hole
}

TEST(SimulateAllocatorTest, OomStopsTheStepAndNamesTheBuffer) {
  StreamBuilder s;
  s.A(25 * MiB, /*op=*/3);
  s.A(1000, 4);
  uint32_t bad = s.A(5 * MiB, 7);
  s.A(MiB, 8);
  AllocatorOptions opt;
  opt.capacity_bytes = 30 * MiB;
  auto r = SimulateAllocator(s.es, opt);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->oom.has_value());
  EXPECT_EQ(r->oom->buffer, bad);
  EXPECT_EQ(r->oom->op, 7u);
  EXPECT_EQ(r->oom->event_index, 2);
  EXPECT_EQ(r->events_simulated, 2);
  EXPECT_EQ(r->oom->info.tried_to_allocate_bytes, 20 * MiB);
  EXPECT_EQ(r->stats.num_ooms, 1);
  EXPECT_EQ(r->stats.num_alloc_retries, 1);
  auto j = AllocatorReportToJson(*r);
  EXPECT_EQ(j["oom"]["buffer"], bad);
  EXPECT_THAT(j["oom"]["message"].get<std::string>(), ::testing::HasSubstr("Tried to allocate"));
}

TEST(SimulateAllocatorTest, RejectsBadConfAndBadStreams) {
  StreamBuilder s;
  uint32_t a = s.A(100);
  AllocatorOptions opt;
  opt.alloc_conf = "max_split_size_mb:5";
  auto r = SimulateAllocator(s.es, opt);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("max_split_size_mb"));
  opt.alloc_conf = "";
  s.F(a);
  s.F(a);
  r = SimulateAllocator(s.es, opt);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("events[2]"));
}

TEST(SimulateAllocatorTest, ZeroByteBuffersNeverReachTheAllocator) {
  StreamBuilder s;
  uint32_t z = s.A(0);
  s.F(z);
  auto r = SimulateAllocator(s.es, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->peak_reserved_bytes, 0);
}

TEST(SimulateAllocatorTest, JsonHasStableKeyOrder) {
  StreamBuilder s;
  s.A(1000);
  auto r = SimulateAllocator(s.es, {});
  ASSERT_TRUE(r.ok());
  auto j = AllocatorReportToJson(*r);
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_THAT(keys, ::testing::ElementsAre("model", "alloc_conf", "capacity_bytes",
                                           "peak_allocated_bytes", "peak_reserved_bytes",
                                           "peak_requested_bytes", "ideal_peak_bytes",
                                           "events_simulated", "fragmentation", "stats", "oom"));
  EXPECT_EQ(j["stats"]["reserved_bytes"]["small_pool"]["peak"], 2 * MiB);
  EXPECT_EQ(j.dump(), AllocatorReportToJson(*SimulateAllocator(s.es, {})).dump());
}

// A stream whose first 7 events (the "parameters", a zero-byte buffer and a freed workspace)
// never change, followed by activations whose sizes grow with |k|.
EventStream PrefixedStream(int64_t k) {
  StreamBuilder s;
  s.A(37632);
  s.A(0);
  const uint32_t w = s.A(3 * MiB);
  s.A(256);
  s.A(9 * MiB);
  s.F(w);
  s.A(600);
  const uint32_t x = s.A(k * 602112), y = s.A(k * 3 * MiB + 512);
  s.F(x);
  const uint32_t z = s.A(k * 700000);
  s.F(y);
  s.A(1000 * k);
  s.F(z);
  return s.es;
}

TEST(SimulateAllocatorTest, ResumingFromAPrefixCheckpointGivesTheSameReport) {
  for (int64_t capacity : {int64_t{0}, 64 * MiB, 24 * MiB, 8 * MiB}) {
    for (const char* conf : {"", "max_split_size_mb:20", "expandable_segments:True"}) {
      AllocatorOptions opt;
      opt.alloc_conf = conf;
      opt.capacity_bytes = capacity;
      CheckpointCache cache;
      for (int64_t k : {1, 2, 5, 9, 17}) {
        SCOPED_TRACE("capacity " + std::to_string(capacity) + " conf '" + conf + "' k " + std::to_string(k));
        const EventStream es = PrefixedStream(k);
        const AllocatorCheckpoint* from = cache.Get(es, 7, opt);
        // 8 MiB cannot hold the prefix's 9 MiB buffer: no checkpoint, the run starts over.
        EXPECT_EQ(from == nullptr, capacity == 8 * MiB);
        auto resumed = SimulateAllocator(es, opt, from);
        auto fresh = SimulateAllocator(es, opt);
        ASSERT_TRUE(resumed.ok() && fresh.ok());
        EXPECT_EQ(AllocatorReportToJson(*resumed).dump(), AllocatorReportToJson(*fresh).dump());
        EXPECT_EQ(resumed->peak_requested_event, fresh->peak_requested_event);
        if (!fresh->oom) {
          const PeakPoint p = FindPeak(es);
          EXPECT_EQ(static_cast<int64_t>(p.event), fresh->peak_requested_event);
          EXPECT_EQ(p.live_bytes, fresh->peak_requested_bytes);
        }
        EXPECT_EQ(cache.Get(es, 7, opt), from);  // made once per option set
      }
    }
  }
}

TEST(SimulateAllocatorTest, ACheckpointOfOtherOptionsIsNotUsed) {
  const EventStream es = PrefixedStream(3);
  AllocatorOptions small;
  small.capacity_bytes = 24 * MiB;
  CheckpointCache cache;
  const AllocatorCheckpoint* unlimited = cache.Get(es, 7, AllocatorOptions{});
  ASSERT_NE(unlimited, nullptr);
  auto r = SimulateAllocator(es, small, unlimited);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(AllocatorReportToJson(*r).dump(), AllocatorReportToJson(*SimulateAllocator(es, small)).dump());
  EXPECT_NE(cache.Get(es, 7, small), unlimited);
  AllocatorOptions place;
  place.record_placement = true;
  EXPECT_EQ(cache.Get(es, 7, place), nullptr);  // a placement record needs every event's address
  EXPECT_EQ(cache.Get(es, 0, AllocatorOptions{}), nullptr);
}

}  // namespace
}  // namespace memsim
