#include "sim/report/timeline_table.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "lib/io/graph_json.h"
#include "sim/pipeline.h"

namespace memsim {
namespace {

RunResult Simulated(const Graph& g, const RunConfig& c) {
  auto r = RunPipeline(g, c);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return std::move(r).value();
}

Graph Load(const std::string& name) {
  auto g = LoadGraph(std::string(MEMSIM_SOURCE_DIR) + "/graphs/" + name);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return std::move(g).value();
}

TEST(TimelineTableTest, OneRowPerEventWhosePeaksAreTheRunsPeaks) {
  Graph g = Load("mnist_cnn.json");
  RunConfig c;
  c.sim.symbols["batch"] = 8;
  c.sim.optimizer = "adam";
  RunResult r = Simulated(g, c);
  auto t = MakeTimelineTable(g, r.sim.events, c.alloc);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const size_t n = r.sim.events.events.size();
  ASSERT_EQ(t->tensor.size(), n);
  ASSERT_EQ(t->reserved.size(), n);
  EXPECT_EQ(t->allocator_rows, n);
  EXPECT_EQ(*std::max_element(t->live.begin(), t->live.end()), r.sim.peak.peak_live_bytes);
  EXPECT_EQ(t->live[r.sim.peak.peak_event], r.sim.peak.peak_live_bytes);
  EXPECT_EQ(*std::max_element(t->allocated.begin(), t->allocated.end()), r.alloc.peak_allocated_bytes);
  EXPECT_EQ(*std::max_element(t->reserved.begin(), t->reserved.end()), r.alloc.peak_reserved_bytes);
  for (size_t i = 0; i < n; ++i) {
    const MemEvent& e = r.sim.events.events[i];
    EXPECT_EQ(t->tensor[i], r.sim.events.buffers[e.buffer].name);
    EXPECT_EQ(t->phase[i], e.phase);
    EXPECT_LE(t->allocated[i], t->reserved[i]);
    EXPECT_EQ(t->op[i], e.op == kNoOp ? "" : g.ops[e.op].name);
  }
}

// After a simulated OOM the report's peaks are the allocator's without the capacity limit (Note
// [Would need]): EffectiveAllocatorOptions drops the capacity and the columns cover every event.
TEST(TimelineTableTest, AfterASimulatedOomTheColumnsAreWhatTheStepWouldNeed) {
  Graph g = Load("alexnet.json");
  RunConfig c;
  c.sim.symbols["batch"] = 4096;
  c.sim.optimizer = "adam";
  ASSERT_TRUE(ApplyGpu("T4", &c).ok());
  RunResult r = Simulated(g, c);
  ASSERT_TRUE(r.alloc.oom.has_value());
  auto t = MakeTimelineTable(g, r.sim.events, EffectiveAllocatorOptions(c, r));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(EffectiveAllocatorOptions(c, r).capacity_bytes, 0);
  EXPECT_EQ(t->allocator_rows, r.sim.events.events.size());
  EXPECT_EQ(static_cast<int64_t>(t->allocator_rows), r.alloc.events_simulated);
  EXPECT_LT(r.alloc.oom->event_index, r.alloc.events_simulated);
  EXPECT_EQ(t->live.size(), r.sim.events.events.size());
  EXPECT_EQ(*std::max_element(t->reserved.begin(), t->reserved.end()), r.alloc.peak_reserved_bytes);
}

TEST(TimelineTableTest, ExpandableAndIdealModels) {
  Graph g = Load("mlp.json");
  RunConfig c;
  c.sim.symbols["batch"] = 64;
  c.alloc.model = AllocatorModel::kExpandable;
  RunResult r = Simulated(g, c);
  auto t = MakeTimelineTable(g, r.sim.events, c.alloc);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*std::max_element(t->reserved.begin(), t->reserved.end()), r.alloc.peak_reserved_bytes);
  c.alloc.model = AllocatorModel::kIdeal;
  auto ideal = MakeTimelineTable(g, r.sim.events, c.alloc);
  ASSERT_TRUE(ideal.ok());
  EXPECT_EQ(ideal->allocator_rows, 0u);
  c.alloc.model = AllocatorModel::kCaching;
  c.alloc.alloc_conf = "max_split_size_mb:abc";
  EXPECT_FALSE(MakeTimelineTable(g, r.sim.events, c.alloc).ok());
}

}  // namespace
}  // namespace memsim
