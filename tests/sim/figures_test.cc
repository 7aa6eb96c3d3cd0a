// sim/figures and the pipeline's would-need rule (Note [Would need] in docs/cli.md): after an
// OOM every peak is the unconstrained allocator's, the OOM op is where the capacity-limited one
// fails; run JSON, sweep rows and ranks name the figures alike; fit's two answers agree with run.
#include "sim/figures.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/graph_builder.h"

#include "lib/io/graph_json.h"
#include "sim/fit.h"
#include "sim/pipeline.h"
#include "sim/report/figures_report.h"
#include "sim/report/run_report.h"
#include "sim/report/sweep_report.h"
#include "sim/sweep.h"

namespace memsim {
namespace {

using testing::ZooGraph;

using ::testing::HasSubstr;
using ::testing::StartsWith;


RunConfig OnGpu(const std::string& gpu, int64_t batch, const std::string& optimizer = "adamw") {
  RunConfig c;
  c.sim.symbols["batch"] = batch;
  c.sim.optimizer = optimizer;
  EXPECT_TRUE(ApplyGpu(gpu, &c).ok());
  return c;
}

TEST(WouldNeedTest, AfterAnOomThePeaksAreTheUnconstrainedAllocators) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  RunConfig c = OnGpu("T4", 16);
  auto limited = RunPipeline(g, c);
  ASSERT_TRUE(limited.ok()) << limited.status().message();
  ASSERT_TRUE(limited->alloc.oom.has_value());
  RunConfig free = c;
  free.alloc.capacity_bytes = 0;
  auto unconstrained = RunPipeline(g, free);
  ASSERT_TRUE(unconstrained.ok());
  EXPECT_FALSE(unconstrained->alloc.oom.has_value());
  EXPECT_EQ(limited->alloc.peak_reserved_bytes, unconstrained->alloc.peak_reserved_bytes);
  EXPECT_EQ(limited->alloc.peak_allocated_bytes, unconstrained->alloc.peak_allocated_bytes);
  EXPECT_EQ(limited->device.peak_device_bytes, unconstrained->device.peak_device_bytes);
  EXPECT_EQ(limited->alloc.events_simulated, static_cast<int64_t>(limited->sim.events.events.size()));
  // The OOM is the capacity-limited run's: over the capacity left to the allocator.
  EXPECT_GT(limited->alloc.peak_reserved_bytes, limited->alloc.capacity_bytes);
  EXPECT_LT(limited->alloc.oom->event_index, static_cast<int64_t>(limited->sim.events.events.size()));
  const RunReport rep = MakeRunReport(g, c, *limited, 3);
  EXPECT_TRUE(rep.figures.oom);
  EXPECT_FALSE(rep.figures.oom_op.empty());
  EXPECT_GT(rep.figures.peak_device_used_bytes, rep.figures.capacity_bytes);
  EXPECT_EQ(rep.figures.verdict, Verdict::kDoesNotFit);
}

TEST(WouldNeedTest, SweepPeaksGrowWithTheBatchPastTheCapacity) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  SweepSpec spec;
  spec.base = OnGpu("T4", 1);
  spec.axes.push_back(SymbolAxis("batch", {1, 2, 4, 8, 16, 32}));
  std::vector<SweepRow> rows;
  ASSERT_TRUE(StreamSweep(g, spec, 6, SweepSlice{}, 2, [&](size_t, const SweepRow& r) {
                rows.push_back(r);
                return Status::OK();
              }).ok());
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_FALSE(rows.front().oom);
  EXPECT_TRUE(rows.back().oom);
  for (size_t i = 1; i < rows.size(); ++i) {
    EXPECT_GT(rows[i].peak_reserved_bytes, rows[i - 1].peak_reserved_bytes) << i;
    EXPECT_GT(rows[i].peak_allocated_bytes, rows[i - 1].peak_allocated_bytes) << i;
    EXPECT_GT(rows[i].peak_device_used_bytes, rows[i - 1].peak_device_used_bytes) << i;
    EXPECT_GE(rows[i].oom, rows[i - 1].oom) << i;
    EXPECT_EQ(rows[i].oom, !rows[i].oom_op.empty()) << i;
  }
}

// The figures of one configuration: the same values under the same keys in `run --json`, a
// sweep row's JSON and its CSV line, for zoo graphs × batches on both sides of the capacity.
TEST(FiguresTest, RunJsonAndSweepRowsAgree) {
  const std::vector<std::string> keys = {"peak_live_bytes", "peak_phase", "peak_allocated_bytes", "peak_reserved_bytes",
                                         "peak_device_used_bytes", "capacity_bytes", "oom", "oom_op", "oom_phase",
                                         "verdict"};
  int ooms = 0, fits = 0;
  for (const std::string& name : {"nanogpt_gpt2_small", "resnet18"}) {
    Graph g = ZooGraph(name);
    SweepSpec spec;
    spec.base = OnGpu("T4", 1, "adam");
    const std::vector<int64_t> batches = {8, 64, 256};
    spec.axes.push_back(SymbolAxis("batch", batches));
    std::vector<SweepRow> rows;
    ASSERT_TRUE(StreamSweep(g, spec, batches.size(), SweepSlice{}, 2, [&](size_t, const SweepRow& r) {
                  rows.push_back(r);
                  return Status::OK();
                }).ok());
    for (size_t i = 0; i < batches.size(); ++i) {
      RunConfig c = spec.Config(i);
      auto r = RunPipeline(g, c);
      ASSERT_TRUE(r.ok());
      const nlohmann::ordered_json run = ToJson(MakeRunReport(g, c, *r, 3));
      const nlohmann::ordered_json row = ToJson(rows[i]);
      for (const std::string& k : keys) EXPECT_EQ(run[k], row[k]) << name << " batch " << batches[i] << " " << k;
      (rows[i].oom ? ooms : fits)++;
      // CSV: the same numbers in the columns of the same names.
      const std::string csv = SweepRowLine(spec, i, rows[i], SweepFormat::kCsv, false);
      EXPECT_EQ(csv, std::to_string(batches[i]) + "," + std::to_string(run["peak_live_bytes"].get<int64_t>()) + "," +
                         std::to_string(run["peak_allocated_bytes"].get<int64_t>()) + "," +
                         std::to_string(run["peak_reserved_bytes"].get<int64_t>()) + "," +
                         std::to_string(run["peak_device_used_bytes"].get<int64_t>()) + "," +
                         (run["oom"].get<bool>() ? "true," + run["oom_op"].get<std::string>() : "false,-") + ",\n");
    }
  }
  EXPECT_GT(ooms, 0);
  EXPECT_GT(fits, 0);
  EXPECT_EQ(SweepHeaderLine(SweepSpec{OnGpu("T4", 1), {SymbolAxis("batch", {1})}}, SweepFormat::kCsv, false),
            "batch,peak_live_bytes,peak_allocated_bytes,peak_reserved_bytes,peak_device_used_bytes,oom,oom_op,error\n");
}

TEST(FiguresTest, TheVerdictLineComesFirst) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  for (int64_t batch : {1, 64}) {
    RunConfig c = OnGpu("T4", batch);
    auto r = RunPipeline(g, c);
    ASSERT_TRUE(r.ok());
    const std::string text = ToText(MakeRunReport(g, c, *r, 3));
    if (r->alloc.oom) {
      EXPECT_THAT(text, StartsWith("does not fit on T4: would need ")) << text;
      EXPECT_THAT(text.substr(0, text.find('\n')), HasSubstr(", OOM at op "));
    } else {
      EXPECT_THAT(text, StartsWith("fits on T4: device used ")) << text;
    }
  }
  MemoryFigures none;
  EXPECT_EQ(VerdictLine(none, "T4"), "");
}

TEST(FitTest, RunAgreesWithBothAnswers) {
  Graph g = ZooGraph("nanogpt_gpt2_small");
  RunConfig base = OnGpu("T4", 1);
  auto fit = FitBatch(g, base, 256);
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  ASSERT_GT(fit->max_batch, 1);
  ASSERT_GT(fit->max_batch_at_top, 0);
  EXPECT_LE(fit->max_batch_at_top, fit->max_batch);
  auto run = [&](int64_t batch) {
    RunConfig c = base;
    c.sim.symbols["batch"] = batch;
    c.workspace_range = true;  // as `memsim run`
    auto r = RunPipeline(g, c);
    EXPECT_TRUE(r.ok());
    return FiguresOf(&g, PeakPoint{}, r->alloc, r->device, c.alloc.capacity_bytes);
  };
  EXPECT_FALSE(run(fit->max_batch).oom);
  EXPECT_TRUE(run(fit->max_batch + 1).oom);
  EXPECT_TRUE(run(fit->max_batch_at_top).fits_at_top());
  EXPECT_FALSE(run(fit->max_batch_at_top + 1).fits_at_top());
  EXPECT_EQ(fit->at_max.peak_reserved_bytes, fit->at_max.peak_reserved_bytes);
}

}  // namespace
}  // namespace memsim
