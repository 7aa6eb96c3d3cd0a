// Regression tests for hostile snapshots and alloc_data (tests/data/robustness/, one file per
// class of bad input; docs/robustness.md lists them), and the alloc_data layouts of every
// PyTorch version memory_viz has read.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "sim/replay/replay.h"
#include "sim/replay/snapshot.h"
#include "tests/testing/test_data.h"

namespace memsim {
namespace {

using ::testing::HasSubstr;

std::string Data(const std::string& name) { return test_data::TestDataPath("robustness/" + name); }

// The error of loading (or, if loading succeeds, replaying) |name|.
std::string ErrorOf(const std::string& name) {
  auto s = LoadSnapshotFile(Data(name));
  if (s.ok()) {
    auto r = ReplaySnapshot(*s);
    EXPECT_FALSE(r.ok()) << name << " was accepted";
    return r.ok() ? "" : r.status().message();
  }
  EXPECT_THAT(s.status().message(), HasSubstr(name));
  EXPECT_LT(s.status().message().size(), 600u);
  return s.status().message();
}

TEST(SnapshotRobustnessTest, IntegerBeyond64BitsSaysSo) {
  EXPECT_THAT(ErrorOf("snapshot_int_beyond_64_bits.pickle"),
              HasSubstr("segments[0].address: integer does not fit in 64 bits"));
}

TEST(SnapshotRobustnessTest, OverlappingSegmentsAreRefused) {
  EXPECT_THAT(ErrorOf("snapshot_overlapping_segments.pickle"), HasSubstr("overlap"));
}

TEST(SnapshotRobustnessTest, RepeatedSegmentByMemoIsBoundedByFileSize) {
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THAT(ErrorOf("snapshot_repeated_segment_memo.pickle"),
              HasSubstr("more segments, blocks and events than a file of this size can hold"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(SnapshotRobustnessTest, TenMegabytesOfEmptyListsIsBounded) {
  // MARK, 10,000,000 x EMPTY_LIST, LIST, STOP: one value per byte, far denser than any snapshot.
  const std::string data = std::string("\x80\x04(", 3) + std::string(10000000, ']') + "l.";
  auto s = ParseSnapshot(data);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("more values than a pickle of"));
}

TEST(SnapshotRobustnessTest, SettingsThatAllocConfRefusesAreRefused) {
  EXPECT_THAT(ErrorOf("snapshot_bad_settings.pickle"),
              HasSubstr("allocator_settings.garbage_collection_threshold: must be in [0.0, 1.0)"));
}

TEST(SnapshotRobustnessTest, SizeNear2To63IsOutOfRange) {
  EXPECT_THAT(ErrorOf("snapshot_size_near_2_63.pickle"),
              HasSubstr("device_traces[0][0].size: 9223372036854775807 bytes is out of range"));
  EXPECT_THAT(ErrorOf("alloc_data_size_near_2_63.json"), HasSubstr("/elements_size/0"));
}

TEST(SnapshotRobustnessTest, FreeAtUnknownAddressNamesTheTraceIndex) {
  EXPECT_THAT(ErrorOf("snapshot_free_unknown_address.pickle"), HasSubstr("trace[0]"));
}

TEST(SnapshotRobustnessTest, BlockOutsideItsSegmentIsRefused) {
  EXPECT_THAT(ErrorOf("snapshot_block_outside_segment.pickle"),
              HasSubstr("block runs past the end of its segment"));
}

// Found by snapshot_fuzz (the crash input itself): a 4,370-byte message quoting a text line.
TEST(SnapshotRobustnessTest, FuzzLongBadIntegerLineGivesAShortMessage) {
  EXPECT_THAT(ErrorOf("fuzz_snapshot_long_bad_integer_line.pickle"), HasSubstr("bad integer"));
}

TEST(SnapshotRobustnessTest, DirectoryIsReportedAsADirectory) {
  auto s = LoadSnapshotFile(test_data::TestDataPath(""));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("is a directory"));
}

TEST(SnapshotRobustnessTest, DeepJsonIsRefusedBeforeParsing) {
  const std::string deep = "{\"actions\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  auto s = ParseSnapshot(deep);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("nested deeper than 64 levels"));
}

// PyTorch 2.0's trace_plot wrote `elements: [{size, info}]` instead of elements_size/_info.
TEST(SnapshotLayoutTest, AllocDataOfPyTorch20Elements) {
  auto s = LoadSnapshotFile(Data("alloc_data_v20_elements.json"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->trace.size(), 4u);
  EXPECT_EQ(s->trace[0].size, 4096);
  EXPECT_EQ(s->trace[1].size, 7);
  EXPECT_EQ(s->trace[3].action, TraceAction::kFreeCompleted);
  auto r = ReplaySnapshot(*s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->recorded_peak_allocated_bytes, 4096 + 7);
}

// PyTorch 2.1+ trace_plot: elements_size + elements_info (the real resnet18 recording).
TEST(SnapshotLayoutTest, AllocDataOfPyTorch21ElementsSize) {
  auto s = LoadSnapshotFile(
      test_data::TestDataPath("gpu/resnet18_bs8_sgd_momentum_first_iter_alloc_data.json"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->format, MemorySnapshot::Format::kAllocData);
  EXPECT_EQ(s->trace.size(), 664u);
}

// The trace_plot HTML page itself, with `alloc_data = {...}` embedded.
TEST(SnapshotLayoutTest, TracePlotHtmlPage) {
  const std::string html =
      "<html><script>\nvar alloc_data = {\"actions\": [0, 0], \"elements\": [{\"size\": 100, "
      "\"info\": \"x}\"}]};\n</script></html>";
  auto s = ParseSnapshot(html);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->trace.size(), 2u);
}

// PyTorch >= 2.1 trace_plot / segment_plot pages embed the snapshot pickle as base64.
TEST(SnapshotLayoutTest, HtmlPageWithEmbeddedPickle) {
  auto s = LoadSnapshotFile(Data("trace_plot_v21_embedded_pickle.html"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->format, MemorySnapshot::Format::kPickle);
  ASSERT_EQ(s->segments.size(), 1u);
  ASSERT_EQ(s->trace.size(), 2u);
  EXPECT_EQ(s->trace[0].size, 4096);
  auto r = ReplaySnapshot(*s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->allocs, 1);
}

TEST(SnapshotLayoutTest, BrokenBase64IsAnError) {
  auto s = ParseSnapshot("<html>[{\"name\": \"snapshot.pickle\", \"base64\": \"gA*J\"}]</html>");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("invalid base64 character"));
}

// Very old dumps (torch.cuda.memory_snapshot() of 1.x): a bare list of segments.
TEST(SnapshotLayoutTest, BareSegmentList) {
  auto s = LoadSnapshotFile(std::string(MEMSIM_SOURCE_DIR) + "/fuzz/corpus/snapshot/pickle_bare_list_p2.pickle");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->segments.size(), 1u);
  EXPECT_EQ(s->segments[0].blocks.size(), 2u);
  EXPECT_TRUE(s->trace.empty());
}

// Dumps whose blocks carry no address (torch 1.13 / 2.0): blocks follow each other.
TEST(SnapshotLayoutTest, BlocksWithoutAddressesTileTheSegment) {
  auto s = LoadSnapshotFile(std::string(MEMSIM_SOURCE_DIR) + "/fuzz/corpus/snapshot/pickle_v2x_p4.pickle");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->segments.size(), 2u);
  const SnapshotSegment& big = s->segments[0];  // lower address
  ASSERT_EQ(big.blocks.size(), 2u);
  EXPECT_EQ(big.blocks[1].address, big.address + 4 * kMiB);
  EXPECT_EQ(s->recorded_config.roundup_power2_divisions[1], 4);
}

}  // namespace
}  // namespace memsim
