#include "sim/fit.h"
#include "sim/sweep.h"

#include <gtest/gtest.h>

#include "tests/testing/graph_builder.h"

#include "lib/io/graph_json.h"
#include "sim/report/sweep_report.h"

namespace memsim {
namespace {

using testing::ZooGraph;


std::vector<RunConfig> Grid() {
  std::vector<RunConfig> configs;
  for (int64_t batch : {1, 2, 4, 8, 16, 32})
    for (const char* opt : {"sgd", "adam", "nonexistent"})
      for (const char* profile : {"cuda", "cpu"}) {
        RunConfig c;
        c.sim.symbols["batch"] = batch;
        c.sim.optimizer = opt;
        c.sim.profile = profile;
        c.alloc.capacity_bytes = int64_t{200} << 20;
        c.device.context_bytes = 0;  // 200 MiB for the allocator alone
        configs.push_back(c);
      }
  return configs;
}

TEST(SweepTest, RowsDoNotDependOnTheThreadCount) {
  Graph g = ZooGraph("resnet18");
  auto configs = Grid();
  auto one = RunSweep(g, configs, 1);
  auto two = RunSweep(g, configs, 2);
  ASSERT_EQ(one.size(), configs.size());
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i].status.ToString(), two[i].status.ToString());
    EXPECT_EQ(one[i].peak_live_bytes, two[i].peak_live_bytes) << i;
    EXPECT_EQ(one[i].peak_reserved_bytes, two[i].peak_reserved_bytes) << i;
    EXPECT_EQ(one[i].oom, two[i].oom) << i;
    EXPECT_EQ(one[i].oom_message, two[i].oom_message) << i;
  }
}

TEST(SweepTest, EachRowEqualsASingleSimulation) {
  Graph g = ZooGraph("mlp");
  auto configs = Grid();
  auto rows = RunSweep(g, configs, 2);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (configs[i].sim.optimizer == "nonexistent") {
      EXPECT_FALSE(rows[i].status.ok());
      EXPECT_NE(rows[i].status.message().find("nonexistent"), std::string::npos);
      continue;
    }
    auto r = Simulate(g, configs[i].sim);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(rows[i].peak_live_bytes, r->peak.peak_live_bytes);
  }
}

TEST(SweepTest, BiggerBatchesRunOutOfMemoryFirst) {
  Graph g = ZooGraph("resnet18");
  auto rows = RunSweep(g, Grid(), 0);
  bool seen_oom = false;
  for (size_t i = 0; i < rows.size(); i += 6) {  // sgd, cuda, ascending batch
    if (seen_oom) {
      EXPECT_TRUE(rows[i].oom) << "batch index " << i / 6;
    }
    seen_oom |= rows[i].oom;
  }
  EXPECT_TRUE(seen_oom) << "200 MiB cannot hold resnet18 at batch 32";
  EXPECT_FALSE(rows[0].oom);
}

TEST(FitTest, FindsTheBoundary) {
  Graph g = ZooGraph("resnet18");
  RunConfig base;
  base.sim.optimizer = "adam";
  base.alloc.capacity_bytes = int64_t{1} << 30;
  base.device.context_bytes = 0;  // 1 GiB for the allocator alone
  auto fit = FitBatch(g, base, 4096);
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  ASSERT_GT(fit->max_batch, 1);
  EXPECT_FALSE(fit->at_max.oom);
  EXPECT_TRUE(fit->above.oom);
  EXPECT_LE(fit->at_max.peak_reserved_bytes, base.alloc.capacity_bytes);
  // The boundary really is one: max_batch fits, max_batch + 1 does not.
  RunConfig c = base;
  c.sim.symbols["batch"] = fit->max_batch + 1;
  EXPECT_TRUE(RunOne(g, c).oom);
  c.sim.symbols["batch"] = fit->max_batch;
  EXPECT_FALSE(RunOne(g, c).oom);
  EXPECT_LT(fit->evaluated, 20) << "down from the live-bytes bound, twice (the point and the top of the range)";
  EXPECT_LE(fit->max_batch_at_top, fit->max_batch);
  EXPECT_TRUE(fit->at_top.fits_at_top());
  EXPECT_GE(fit->confirmed, 2) << "both sides of each answer confirmed on the exact path";
  EXPECT_LE(fit->confirmed, 4);
}

TEST(FitTest, NeedsACapacityAndABatchSymbol) {
  Graph g = ZooGraph("resnet18");
  RunConfig base;
  EXPECT_FALSE(FitBatch(g, base, 64).ok());
  base.alloc.capacity_bytes = int64_t{64} << 20;
  auto tiny = FitBatch(g, base, 64);
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->max_batch, 0) << "64 MiB does not hold resnet18's parameters, grads and activations";
}

TEST(FitTest, StopsAtTheLimit) {
  Graph g = ZooGraph("mlp");
  RunConfig base;
  base.alloc.capacity_bytes = int64_t{80} << 30;
  auto fit = FitBatch(g, base, 100);
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit->max_batch, 100);
  EXPECT_FALSE(fit->above.oom);
}

// fit --search seq: the longest sequence that fits, batch fixed; the boundary is real.
TEST(FitTest, SearchesAnySymbol) {
  Graph g = ZooGraph("cs336_small");
  RunConfig base;
  base.sim.symbols["batch"] = 8;
  base.sim.optimizer = "adamw";
  base.alloc.capacity_bytes = int64_t{16} << 30;
  base.device.context_bytes = 0;
  auto fit = FitSymbol(g, base, "seq", 1 << 16);
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_EQ(fit->symbol, "seq");
  ASSERT_GT(fit->max_batch, 1);
  EXPECT_TRUE(fit->above.oom);
  RunConfig c = base;
  c.sim.symbols["seq"] = fit->max_batch;
  EXPECT_FALSE(RunOne(g, c).oom);
  c.sim.symbols["seq"] = fit->max_batch + 1;
  EXPECT_TRUE(RunOne(g, c).oom);
  EXPECT_FALSE(FitSymbol(g, base, "width", 64).ok()) << "no such symbol";
}

// A value the graph refuses (GPT-2's causal mask is a 1024 x 1024 buffer) ends the search.
TEST(FitTest, AValueTheGraphRefusesEndsTheSearch) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  RunConfig base;
  base.sim.symbols["batch"] = 1;
  base.alloc.capacity_bytes = int64_t{80} << 30;
  auto fit = FitSymbol(g, base, "seq", 1 << 16);
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_EQ(fit->max_batch, 1024);
  EXPECT_GE(fit->confirmed, 1) << "the schedule's answer beyond 1024 was not confirmed: searched again exactly";
  EXPECT_FALSE(fit->above.status.ok());
  EXPECT_NE(std::string(fit->above.status.message()).find("does not broadcast"), std::string::npos);
}

}  // namespace
}  // namespace memsim

namespace memsim {
namespace {

// With ranks that hold different buffers (DataParallel: device 0 gathers the outputs and holds
// the optimizer), a sweep row and a fit answer for the largest rank, not for rank 0 only.
TEST(SweepTest, RowsWithRanksAreTheLargestRanks) {
  const Graph g = ZooGraph("mnist_cnn");
  SweepSpec spec;
  spec.base.sim.optimizer = "adam";
  spec.base.sim.parallel.data_parallel = true;
  spec.base.sim.parallel.world = 3;
  spec.base.alloc.compute_ideal = false;
  spec.axes.push_back(SymbolAxis("batch", {7, 16, 32}));
  std::vector<SweepRow> rows;
  ASSERT_TRUE(StreamSweep(g, spec, 3, SweepSlice{}, 1, [&](size_t, const SweepRow& r) {
                rows.push_back(r);
                return Status::OK();
              }).ok());
  ASSERT_EQ(rows.size(), 3u);
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_TRUE(rows[i].status.ok()) << rows[i].status.message();
    int64_t largest = -1;
    int largest_rank = -1;
    for (int r = 0; r < 3; ++r) {
      RunConfig c = spec.Config(i);
      c.sim.parallel.rank = r;
      auto run = RunPipeline(g, c);
      ASSERT_TRUE(run.ok()) << run.status().message();
      if (run->alloc.peak_reserved_bytes > largest) {
        largest = run->alloc.peak_reserved_bytes;
        largest_rank = r;
      }
    }
    EXPECT_EQ(rows[i].peak_reserved_bytes, largest) << "configuration " << i;
    EXPECT_EQ(rows[i].rank, largest_rank) << "configuration " << i;
    // The CSV and JSONL rows name that rank.
    const std::string csv = SweepRowLine(spec, i, rows[i], SweepFormat::kCsv, false);
    EXPECT_EQ(csv.substr(0, csv.find(',', csv.find(',') + 1) + 1),
              spec.axes[0].labels[i] + "," + std::to_string(largest_rank) + ",");
    EXPECT_NE(SweepRowLine(spec, i, rows[i], SweepFormat::kJsonl, true).find("\"rank\":" + std::to_string(largest_rank)),
              std::string::npos);
  }
  EXPECT_EQ(SweepHeaderLine(spec, SweepFormat::kCsv, false).rfind("batch,rank,peak_live", 0), 0u);
}

}  // namespace
}  // namespace memsim
