// sim/pipeline, sim/sweep, sim/advise and sim/report: one pipeline behind every command, with the
// pipeline's values checked against their invariants on every zoo graph.
#include "sim/pipeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "lib/io/graph_json.h"
#include "sim/advise.h"
#include "sim/report/run_report.h"
#include "sim/report/sweep_report.h"
#include "sim/sweep.h"
#include "tests/testing/invariants.h"

namespace memsim {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> ZooGraphs() {
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::directory_iterator(std::string(MEMSIM_SOURCE_DIR) + "/graphs"))
    if (e.path().extension() == ".json") paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  return paths;
}

TEST(PipelineTest, EveryZooGraphSatisfiesTheInvariantsOnBothProfiles) {
  std::vector<std::string> zoo = ZooGraphs();
  ASSERT_GE(zoo.size(), 10u);
  for (const std::string& path : zoo) {
    auto g = LoadGraph(path);
    ASSERT_TRUE(g.ok()) << g.status().message();
    ASSERT_TRUE(testing::VerifyGraph(*g).ok()) << path << ": " << testing::VerifyGraph(*g).message();
    for (const char* profile : {"cuda", "cpu"}) {
      RunConfig c;
      c.sim.symbols["batch"] = 2;
      c.sim.profile = profile;
      c.sim.optimizer = "adam";
      auto r = RunPipeline(*g, c);
      ASSERT_TRUE(r.ok()) << path << ": " << r.status().message();
      Status b = testing::VerifyBoundGraph(*g, r->sim.bound);
      EXPECT_TRUE(b.ok()) << path << ": " << b.message();
      Status e = testing::VerifyEventStream(r->sim.events);
      EXPECT_TRUE(e.ok()) << path << ": " << e.message();
      EXPECT_GE(r->alloc.peak_allocated_bytes, r->sim.peak.peak_live_bytes) << path << " (rounding only adds)";
      EXPECT_GE(r->alloc.peak_reserved_bytes, r->alloc.peak_allocated_bytes) << path;
    }
  }
}

TEST(PipelineTest, TheVerifiersCatchBrokenStreams) {
  EventStream s;
  s.buffers.push_back(Buffer{"x", 4});
  s.events.push_back({EventKind::kFree, Phase::kForward, 0, kNoOp});
  EXPECT_FALSE(testing::VerifyEventStream(s).ok());
  s.events = {{EventKind::kAlloc, Phase::kOptimizer, 0, kNoOp}, {EventKind::kFree, Phase::kForward, 0, kNoOp}};
  EXPECT_THAT(testing::VerifyEventStream(s).message(), HasSubstr("phase goes back"));
  s.events = {{EventKind::kAlloc, Phase::kForward, 0, kNoOp}, {EventKind::kAlloc, Phase::kForward, 0, kNoOp}};
  EXPECT_THAT(testing::VerifyEventStream(s).message(), HasSubstr("allocated twice"));
}

class MlpPipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto g = LoadGraph(std::string(MEMSIM_SOURCE_DIR) + "/graphs/mlp.json");
    ASSERT_TRUE(g.ok());
    g_ = std::move(*g);
    base_.sim.symbols["batch"] = 64;
    base_.sim.optimizer = "adam";
    base_.device.context_bytes = 0;  // the capacities below are the allocator's budget alone
  }
  Graph g_;
  RunConfig base_;
};

TEST_F(MlpPipelineTest, SweepRowsEqualThePipelineRunAlone) {
  SweepSpec spec{base_, {SymbolAxis("batch", {1, 64, 512}), StringAxis("optimizer", {"sgd", "adam"}, [](const std::string& v, RunConfig* c) { c->sim.optimizer = v; })}};
  ASSERT_EQ(*spec.Count(100), 6u);
  EXPECT_EQ(spec.Picks(5), (std::vector<size_t>{2, 1}));
  for (size_t i = 0; i < 6; ++i) {
    RunConfig c = spec.Config(i);
    SweepRow row = RunOne(g_, c);
    auto r = RunPipeline(g_, c);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(row.peak_live_bytes, r->sim.peak.peak_live_bytes);
    EXPECT_EQ(row.peak_reserved_bytes, r->alloc.peak_reserved_bytes);
    EXPECT_EQ(row.peak_allocated_bytes, r->alloc.peak_allocated_bytes);
  }
  EXPECT_FALSE(spec.Count(5).ok()) << "six configurations are more than five";
}

TEST_F(MlpPipelineTest, RunReportTextAndJsonCarryTheSameNumbers) {
  base_.alloc.capacity_bytes = int64_t{1} << 30;
  auto r = RunPipeline(g_, base_);
  ASSERT_TRUE(r.ok());
  RunReport rep = MakeRunReport(g_, base_, *r, 3);
  EXPECT_EQ(rep.top_tensors_at_peak.size(), 3u);
  auto j = ToJson(rep);
  EXPECT_EQ(j["peak_live_bytes"].get<int64_t>(), r->sim.peak.peak_live_bytes);
  EXPECT_EQ(j["peak_reserved_bytes"].get<int64_t>(), r->alloc.peak_reserved_bytes);
  EXPECT_EQ(j["config"]["optimizer"], "adam");
  std::string text = ToText(rep);
  EXPECT_THAT(text, HasSubstr("(" + std::to_string(r->sim.peak.peak_live_bytes) + " bytes)"));
  EXPECT_THAT(text, HasSubstr("verdict: fits ("));
  EXPECT_EQ(j["device"]["verdict"], "fits");
  EXPECT_EQ(j["peak_device_used_bytes"].get<int64_t>(), r->alloc.peak_reserved_bytes) << "--context-bytes 0";
}

TEST_F(MlpPipelineTest, AdviceIsRankedByReservedSavingAndGivesTheLargestBatch) {
  base_.alloc.capacity_bytes = int64_t{1} << 30;
  auto a = Advise(g_, base_, 1, 4096);
  ASSERT_TRUE(a.ok());
  ASSERT_FALSE(a->changes.empty());
  for (size_t k = 1; k < a->changes.size(); ++k)
    EXPECT_LE(a->changes[k - 1].row.peak_reserved_bytes, a->changes[k].row.peak_reserved_bytes);
  ASSERT_TRUE(a->max_batch.has_value());
  EXPECT_GT(*a->max_batch, 64);
  EXPECT_THAT(ToText(*a), HasSubstr("largest batch that fits as configured"));
  EXPECT_EQ(ToJson(*a)["max_batch"].get<int64_t>(), *a->max_batch);
}

TEST_F(MlpPipelineTest, GpuNamesSetCapacityAndWorkspaceUnlessGiven) {
  RunConfig c = base_;
  ASSERT_TRUE(ApplyGpu("H100", &c).ok());
  EXPECT_GT(c.alloc.capacity_bytes, int64_t{70} << 30);
  EXPECT_EQ(c.sim.cublas_workspace_bytes, int64_t{32} << 20);
  RunConfig d = base_;
  d.alloc.capacity_bytes = 123;
  d.sim.cublas_workspace_bytes = 0;
  ASSERT_TRUE(ApplyGpu("h100", &d, /*keep_capacity=*/true).ok());
  EXPECT_EQ(d.alloc.capacity_bytes, 123);
  EXPECT_EQ(d.sim.cublas_workspace_bytes, 0);
  EXPECT_THAT(ApplyGpu("Z80", &d).message(), HasSubstr("unknown --gpu \"Z80\""));
}

}  // namespace
}  // namespace memsim

namespace memsim {
namespace {

// Note [Version profiles]: a graph records the torch it was exported under; the report warns
// when the run follows another release's rules, and says nothing when they agree.
TEST(VersionWarningTest, AGraphExportedUnder213RunsUnder213WithoutAWarning) {
  auto g = LoadGraph(std::string(MEMSIM_SOURCE_DIR) + "/tests/data/traces_2_13/graphs/mlp.json");
  ASSERT_TRUE(g.ok());
  ASSERT_EQ(g->torch_version, "2.13.0");
  RunConfig c;
  c.sim.symbols["batch"] = 8;
  c.sim.profile = "cpu";
  auto same = RunPipeline(*g, c);
  ASSERT_TRUE(same.ok());
  RunReport rep = MakeRunReport(*g, c, *same, 3);
  EXPECT_TRUE(rep.warnings.empty());
  EXPECT_FALSE(ToJson(rep).contains("warnings"));
  c.sim.torch = "1.13";
  auto other = RunPipeline(*g, c);
  ASSERT_TRUE(other.ok());
  RunReport old = MakeRunReport(*g, c, *other, 3);
  ASSERT_EQ(old.warnings.size(), 1u);
  EXPECT_THAT(old.warnings[0], HasSubstr("exported under torch 2.13.0"));
  EXPECT_THAT(old.warnings[0], HasSubstr("--torch 2.13"));
  EXPECT_THAT(ToText(old), HasSubstr("warning: the graph was exported under torch 2.13.0"));
  EXPECT_EQ(ToJson(old)["config"]["torch"], "1.13");
  // The allocator's options are named as the release reads them.
  c.sim.profile = "cuda";
  c.alloc.alloc_conf = "expandable_segments:True";
  for (const char* torch : {"2.13", "1.13"}) {
    c.sim.torch = torch;
    auto r = RunPipeline(*g, c);
    ASSERT_TRUE(r.ok());
    EXPECT_THAT(ToText(MakeRunReport(*g, c, *r, 3)),
                HasSubstr(std::string(torch) == "2.13" ? "PYTORCH_ALLOC_CONF=expandable_segments:True"
                                                       : "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"));
  }
}

}  // namespace
}  // namespace memsim
