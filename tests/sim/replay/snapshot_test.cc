#include "sim/replay/snapshot.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/test_data.h"

namespace memsim {
namespace {

TEST(SnapshotTest, ParsesAllocDataInsideHtml) {
  const std::string html =
      "<html><script>let alloc_data = {\"actions\": [0, 1, 0], \"elements_size\": [1000, 2000],"
      " \"elements_info\": [\"a}\", \"b\"], \"initially_allocated\": []}\n</script></html>";
  auto s = ParseSnapshot(html);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->trace.size(), 3u);
  EXPECT_EQ(s->trace[2].action, TraceAction::kFreeCompleted);
  EXPECT_EQ(s->trace[1].size, 2000);
}

TEST(SnapshotTest, BadFilesGiveErrors) {
  EXPECT_FALSE(ParseSnapshot("").ok());
  EXPECT_FALSE(ParseSnapshot("hello").ok());
  EXPECT_FALSE(ParseSnapshot("{\"actions\": [5], \"elements_size\": [1]}").ok());
  EXPECT_FALSE(ParseSnapshot("{\"actions\": 1}").ok());
  EXPECT_FALSE(ParseSnapshot("{broken").ok());
  auto r = LoadSnapshotFile("/nonexistent/x.pickle");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("/nonexistent/x.pickle"));
}

TEST(SnapshotTest, ReadsRealPickleSegmentsTraceAndSettings) {
  auto s =
      LoadSnapshotFile(test_data::TestDataPath("gpu/transformer_small_ctx256_bs32_fwd_bwd_warm.pickle"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->format, MemorySnapshot::Format::kPickle);
  EXPECT_TRUE(s->has_segments);
  EXPECT_EQ(s->segments.size(), 216u);
  EXPECT_EQ(s->trace.size(), 5163u);
  EXPECT_EQ(s->trace[0].action, TraceAction::kAlloc);
  EXPECT_EQ(s->trace[0].size, 25165824);
  EXPECT_EQ(s->recorded_config.max_split_size, kUnlimitedSplitSize);  // recorded as -1
  EXPECT_FALSE(s->recorded_config.expandable_segments);
  int64_t small = 0;
  for (const auto& seg : s->segments) small += seg.pool == PoolKind::kSmall;
  EXPECT_EQ(small, 8);
}

}  // namespace
}  // namespace memsim
