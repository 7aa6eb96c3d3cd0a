// Note [Replay fragmentation]: the allocator's free memory at the peak of a replay, the segments
// that allocations split, the what-ifs and the warnings, on the real GPU recordings.
#include "sim/replay/fragmentation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sim/replay/replay.h"
#include "sim/replay/snapshot.h"
#include "sim/report/memviz.h"
#include "tests/testing/test_data.h"

namespace memsim {
namespace {

Result<MemorySnapshot> Load(const char* name) {
  return LoadSnapshotFile(test_data::TestDataPath(std::string("gpu/") + name));
}

constexpr const char* kCtx256 = "transformer_small_ctx256_bs32_fwd_bwd_warm.pickle";
constexpr const char* kCompiled = "transformer_small_v50257_ctx64_bs1_compiled_step_warm.pickle";

TEST(ReplayFragmentationTest, AtThePeakTheFreeBytesAddUp) {
  for (const char* name : {kCtx256, kCompiled}) {
    auto snap = Load(name);
    ASSERT_TRUE(snap.ok()) << snap.status().ToString();
    auto r = ReplaySnapshot(*snap);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->at_peak.has_value());
    const PeakFragmentation& f = *r->at_peak;
    SCOPED_TRACE(name);
    // Reserved never grows in these warm traces: the peak is where the most is allocated.
    EXPECT_EQ(f.reserved_bytes, r->simulated_peak_reserved_bytes);
    EXPECT_EQ(f.allocated_bytes, r->simulated_peak_allocated_bytes);
    EXPECT_GE(f.event, 0);
    EXPECT_EQ(f.free_bytes, f.reserved_bytes - f.allocated_bytes);
    EXPECT_EQ(f.inactive_split_bytes + f.unsplit_free_bytes, f.free_bytes);
    EXPECT_LE(f.largest_free_block_bytes, f.free_bytes);
    EXPECT_EQ(f.top_segments.size(), PeakFragmentation::kSegments);
    for (size_t k = 1; k < f.top_segments.size(); ++k)
      EXPECT_GE(f.top_segments[k - 1].free_bytes, f.top_segments[k].free_bytes) << "most free space first";
    for (const FragmentedSegment& s : f.top_segments) {
      EXPECT_GT(s.allocated_bytes, 0) << "split by an allocation";
      int64_t listed = 0;
      for (const SplitAllocation& b : s.blocks) {
        listed += b.size;
        if (b.allocated && b.event >= 0) EXPECT_FALSE(b.where.empty()) << "recorded with Python frames";
      }
      EXPECT_LE(listed, s.total_bytes);
      EXPECT_EQ(s.more_blocks == 0, listed == s.total_bytes);
    }
    EXPECT_TRUE(r->warnings.empty());
  }
}

TEST(ReplayFragmentationTest, ThePeakNamesTheUsersCode) {
  auto snap = Load(kCompiled);
  ASSERT_TRUE(snap.ok());
  auto r = ReplaySnapshot(*snap);
  ASSERT_TRUE(r.ok());
  // Recorded with C++ frames first ("??", "*.cpp"): the first user Python frame is named.
  EXPECT_EQ(r->at_peak->where, "optimizer.py:78 step");
  snap = Load(kCtx256);
  ASSERT_TRUE(snap.ok());
  r = ReplaySnapshot(*snap);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->at_peak->event, 1402);
  EXPECT_EQ(r->at_peak->where, "nn_utils.py:13 log_softmax");
  EXPECT_EQ(r->at_peak->free_bytes, 253109760);  // 241.38 MiB, all inside split segments
  EXPECT_EQ(r->at_peak->unsplit_free_bytes, 0);
}

// The what-ifs replay the same trace cold; expandable segments need less (docs/allocator.md,
// Validation: 13,296 and 3,874 MiB), the baseline is the recorded settings cold.
TEST(ReplayFragmentationTest, WhatIfsReplayTheTraceUnderOtherSettings) {
  for (auto [name, expandable_mib] : {std::pair{kCtx256, 13296}, std::pair{kCompiled, 3874}}) {
    auto snap = Load(name);
    ASSERT_TRUE(snap.ok());
    ReplayOptions opt;
    opt.what_if = true;
    auto r = ReplaySnapshot(*snap, opt);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->what_if.size(), 4u);
    EXPECT_EQ(r->what_if[0].change, "as recorded, cold start");
    EXPECT_EQ(r->what_if[0].change_bytes, 0);
    ReplayOptions cold;
    cold.alloc_conf = "";
    auto base = ReplaySnapshot(*snap, cold);
    ASSERT_TRUE(base.ok());
    EXPECT_EQ(r->what_if[0].peak_reserved_bytes, base->simulated_peak_reserved_bytes);
    EXPECT_EQ(r->what_if[1].change, "expandable_segments:True");
    EXPECT_EQ(r->what_if[1].alloc_conf, "expandable_segments:True");
    EXPECT_EQ(r->what_if[1].peak_reserved_bytes, int64_t{expandable_mib} << 20);
    EXPECT_LT(r->what_if[1].change_bytes, 0);
    EXPECT_EQ(r->what_if[2].change, "max_split_size_mb:128");
    EXPECT_EQ(r->what_if[3].change, "max_split_size_mb:512");
    for (const ReplayWhatIf& w : r->what_if)
      EXPECT_EQ(w.change_bytes, w.peak_reserved_bytes - r->what_if[0].peak_reserved_bytes);
    // The recording itself is unchanged by asking.
    auto plain = ReplaySnapshot(*snap);
    EXPECT_EQ(plain->simulated_peak_reserved_bytes, r->simulated_peak_reserved_bytes);
    EXPECT_TRUE(plain->what_if.empty());
  }
}

TEST(ReplayFragmentationTest, ASnapshotWithoutHistoryWarnsAndDescribesTheDump) {
  auto snap = Load("transformer_small_ctx256_no_history.pickle");
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  ReplayOptions opt;
  opt.what_if = true;
  auto r = ReplaySnapshot(*snap, opt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_THAT(r->warnings[0], ::testing::HasSubstr("no trace history"));
  EXPECT_TRUE(r->what_if.empty()) << "nothing to replay";
  ASSERT_TRUE(r->at_peak.has_value());
  EXPECT_EQ(r->at_peak->event, -1);
  int64_t reserved = 0;
  for (const SnapshotSegment& s : snap->segments) reserved += s.total_size;
  EXPECT_EQ(r->at_peak->reserved_bytes, reserved);
  EXPECT_EQ(r->final_layout_matches, true);
}

TEST(ReplayFragmentationTest, FramesAreReadOncePerPlace) {
  auto snap = Load(kCtx256);
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->frames[0], "");
  EXPECT_GT(snap->frames.size(), 10u);
  for (size_t k = 1; k < snap->frames.size(); ++k) {
    EXPECT_FALSE(snap->frames[k].empty());
    EXPECT_EQ(snap->frames[k].find('\\'), std::string::npos) << "base names only: " << snap->frames[k];
  }
  EXPECT_EQ(snap->frames[snap->trace[0].where], "model.py:54 forward");
}

// Frames come from the file: invalid UTF-8, control characters and long names are cleaned so the
// text and JSON reports never fail on them.
TEST(ReplayFragmentationTest, HostileFramesAreCleaned) {
  using nlohmann::ordered_json;
  const std::string bad_file = std::string("dir/x\xff\xfe\n.py");
  std::string long_name;
  for (int i = 0; i < 100; ++i) long_name += "\xc3\xa9";  // 200 bytes of 'é'
  ordered_json frame = {{"filename", bad_file}, {"line", 7}, {"name", long_name}};
  ordered_json snap;
  snap["segments"] = ordered_json::array({{{"device", 0}, {"address", 0x200000000}, {"total_size", 2097152},
                                            {"stream", 0}, {"segment_type", "large"},
                                            {"blocks", ordered_json::array({{{"address", 0x200000000},
                                                                             {"size", 2097152},
                                                                             {"requested_size", 2097152},
                                                                             {"state", "active_allocated"}}})}}});
  snap["device_traces"] = ordered_json::array(
      {ordered_json::array({{{"action", "alloc"}, {"addr", 0x200000000}, {"size", 2097152}, {"stream", 0},
                             {"frames", ordered_json::array({frame})}}})});
  auto s = ParseSnapshot(ToPickle(snap));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->frames.size(), 2u);
  const std::string& f = s->frames[1];
  EXPECT_EQ(f.rfind("x???.py:7 ", 0), 0u) << f;
  EXPECT_LE(f.size(), 120u + 10u);
  EXPECT_EQ(f.size() % 2, 0u) << "no 'é' cut in half: " << f;
  ReplayOptions opt;
  opt.what_if = true;
  auto r = ReplaySnapshot(*s, opt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NO_THROW(ReplayReportToJson(*r).dump());
}

}  // namespace
}  // namespace memsim
