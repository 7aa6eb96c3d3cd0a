#include "sim/report/memviz.h"
#include "sim/pipeline.h"

#include <gtest/gtest.h>

#include "lib/io/graph_json.h"
#include "sim/allocator/simulate.h"
#include "sim/replay/pickle.h"
#include "sim/replay/replay.h"
#include "sim/replay/snapshot.h"
#include "sim/simulator.h"

namespace memsim {
namespace {

TEST(PickleWriterTest, PlainValuesRoundTripThroughTheSafeReader) {
  nlohmann::ordered_json v = {{"small", 7}, {"negative", -5}, {"big", int64_t{1} << 40},
                              {"huge_unsigned", uint64_t{0x7f0000000000}}, {"text", "héllo"},
                              {"float", 1.5}, {"yes", true}, {"no", false}, {"none", nullptr},
                              {"list", {1, "a", nullptr}}, {"empty_list", nlohmann::ordered_json::array()},
                              {"empty_dict", nlohmann::ordered_json::object()}};
  auto doc = ParsePickle(ToPickle(v));
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  const PyValue& r = doc->root();
  ASSERT_TRUE(r.is_dict());
  EXPECT_EQ(r.Get("small")->as_int(), 7);
  EXPECT_EQ(r.Get("negative")->as_int(), -5);
  EXPECT_EQ(r.Get("big")->as_int(), int64_t{1} << 40);
  EXPECT_EQ(r.Get("huge_unsigned")->as_int(), int64_t{0x7f0000000000});
  EXPECT_EQ(r.Get("text")->as_str(), "héllo");
  EXPECT_DOUBLE_EQ(r.Get("float")->as_float(), 1.5);
  EXPECT_TRUE(r.Get("yes")->as_bool());
  EXPECT_FALSE(r.Get("no")->as_bool());
  EXPECT_TRUE(r.Get("none")->is_none());
  ASSERT_EQ(r.Get("list")->items().size(), 3u);
  EXPECT_EQ(r.Get("list")->items()[1]->as_str(), "a");
  EXPECT_TRUE(r.Get("empty_list")->items().empty());
  EXPECT_TRUE(r.Get("empty_dict")->is_dict());
}

TEST(MemoryVizTest, ExportReplaysExactlyAndMatchesTheAllocatorModel) {
  auto g = LoadGraph(std::string(MEMSIM_SOURCE_DIR) + "/graphs/resnet18.json");
  ASSERT_TRUE(g.ok());
  RunConfig c;
  c.sim.symbols["batch"] = 4;
  c.sim.optimizer = "momentum";
  c.alloc.record_placement = true;
  auto run = RunPipeline(*g, c);
  ASSERT_TRUE(run.ok()) << run.status().message();
  const SimResult* r = &run->sim;
  auto snap = MemoryVizSnapshot(*g, r->events, *run->alloc.placement);
  // Every trace entry names its tensor and category in its frames.
  const auto& trace = snap["device_traces"][0];
  ASSERT_FALSE(trace.empty());
  EXPECT_NE(trace[0]["frames"][0]["name"].get<std::string>().find("[parameter]"), std::string::npos);
  for (const auto& e : trace) EXPECT_LT(e["addr"].get<uint64_t>(), uint64_t{1} << 53) << "exact in JavaScript";

  auto parsed = ParseSnapshot(ToPickle(snap));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  auto replay = ReplaySnapshot(*parsed, {});
  ASSERT_TRUE(replay.ok()) << replay.status().message();
  AllocatorOptions ao;
  auto model = SimulateAllocator(r->events, ao);
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(replay->recorded_peak_reserved_bytes, model->peak_reserved_bytes);
  EXPECT_EQ(replay->simulated_peak_reserved_bytes, model->peak_reserved_bytes);
  EXPECT_EQ(replay->segment_allocs_matched, replay->segment_allocs_recorded);
  EXPECT_GT(*replay->segment_allocs_recorded, 0);
  EXPECT_EQ(replay->alloc_decisions_matched, replay->allocs);
  EXPECT_EQ(replay->final_layout_matches, true);
}

TEST(MemoryVizTest, PlacementIsRecordedOnlyForTheCachingModelWithoutExpandableSegments) {
  auto g = LoadGraph(std::string(MEMSIM_SOURCE_DIR) + "/graphs/mlp.json");
  ASSERT_TRUE(g.ok());
  RunConfig c;
  c.alloc.record_placement = true;
  c.alloc.alloc_conf = "expandable_segments:True";
  EXPECT_FALSE(RunPipeline(*g, c).ok());
  c.alloc.alloc_conf = "";
  c.alloc.model = AllocatorModel::kIdeal;
  EXPECT_FALSE(RunPipeline(*g, c).ok());
  c.alloc.model = AllocatorModel::kCaching;
  c.alloc.alloc_conf = "bogus_key:1";
  EXPECT_FALSE(RunPipeline(*g, c).ok());
  c.alloc.alloc_conf = "";
  auto run = RunPipeline(*g, c);
  ASSERT_TRUE(run.ok());
  ASSERT_TRUE(run->alloc.placement.has_value());
  EXPECT_EQ(run->alloc.placement->address.size(), run->sim.events.events.size());
}

}  // namespace
}  // namespace memsim
