// Every row of a compiled sweep (one CompiledStep per structural option set, names off, shared by
// every configuration and thread) equals the same configuration simulated alone through
// RunPipeline, the path of `memsim run` — for every zoo graph, over a grid of batches and options
// (Note [Compiled step] in docs/sweeps.md).
#include "sim/compiled.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "lib/io/graph_json.h"
#include "sim/report/sweep_report.h"
#include "sim/sweep.h"

namespace memsim {
namespace {

SweepSpec Grid() {
  SweepSpec spec;
  spec.base.alloc.capacity_bytes = int64_t{16} << 30;
  spec.axes.push_back(SymbolAxis("batch", {1, 3, 8}));
  spec.axes.push_back(StringAxis("optimizer", {"sgd", "adamw"}, [](const std::string& v, RunConfig* c) { c->sim.optimizer = v; }));
  spec.axes.push_back(StringAxis("profile", {"cuda", "cpu"}, [](const std::string& v, RunConfig* c) { c->sim.profile = v; }));
  spec.axes.push_back(IntAxis("accumulate", {1, 2}, [](int64_t v, RunConfig* c) { c->sim.accumulate = static_cast<int>(v); }));
  spec.axes.push_back(StringAxis("inplace", {"keep", "off"}, [](const std::string& v, RunConfig* c) {
    if (v != "keep") c->sim.inplace = false;
  }));
  spec.axes.push_back(StringAxis("alloc_conf", {"", "expandable_segments:True"},
                                 [](const std::string& v, RunConfig* c) { c->alloc.alloc_conf = v; }));
  return spec;
}

TEST(CompiledStepTest, EverySweepRowEqualsTheConfigurationAlone) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(std::string(MEMSIM_SOURCE_DIR) + "/graphs"))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 20u);
  const SweepSpec spec = Grid();
  const size_t n = *spec.Count(1000);
  size_t compared = 0;
  for (const auto& file : files) {
    auto g = LoadGraph(file.string());
    ASSERT_TRUE(g.ok()) << g.status().message();
    std::vector<std::string> lines;
    ASSERT_TRUE(StreamSweep(*g, spec, n, SweepSlice{}, 2, [&](size_t i, const SweepRow& r) {
                  lines.push_back(SweepRowLine(spec, i, r, SweepFormat::kJsonl, true));
                  return Status::OK();
                }).ok());
    ASSERT_EQ(lines.size(), n);
    for (size_t i = 0; i < n; ++i) {
      RunConfig c = spec.Config(i);
      c.alloc.compute_ideal = false;
      SweepRow alone;
      auto r = RunPipeline(*g, c);  // names on, compiled for this configuration only
      if (!r.ok()) {
        alone.status = r.status();
      } else {
        alone.peak_live_bytes = r->sim.peak.peak_live_bytes;
        alone.peak_phase = r->sim.peak.peak_phase;
        alone.peak_allocated_bytes = r->alloc.peak_allocated_bytes;
        alone.peak_reserved_bytes = r->alloc.peak_reserved_bytes;
        alone.peak_device_bytes = r->device.peak_device_bytes;
        alone.verdict = r->device.verdict;
        alone.oom = r->alloc.oom.has_value();
        if (alone.oom) alone.oom_message = r->alloc.oom->info.message;
      }
      EXPECT_EQ(lines[i], SweepRowLine(spec, i, alone, SweepFormat::kJsonl, true)) << file.filename() << " configuration " << i;
      ++compared;
    }
  }
  EXPECT_GE(compared, 20u * n);
}

TEST(CompiledStepTest, AnInvalidStructureIsAnErrorRowNotAFailure) {
  auto g = LoadGraph(std::string(MEMSIM_SOURCE_DIR) + "/graphs/mlp.json");
  ASSERT_TRUE(g.ok());
  SweepSpec spec;
  spec.axes.push_back(SymbolAxis("batch", {1, 2}));
  spec.axes.push_back(StringAxis("optimizer", {"sgd", "adamx"}, [](const std::string& v, RunConfig* c) { c->sim.optimizer = v; }));
  std::vector<SweepRow> rows;
  ASSERT_TRUE(StreamSweep(*g, spec, 4, SweepSlice{}, 1, [&](size_t, const SweepRow& r) {
                rows.push_back(r);
                return Status::OK();
              }).ok());
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_TRUE(rows[0].status.ok());
  EXPECT_NE(rows[1].status.message().find("unknown optimizer \"adamx\""), std::string::npos);
  EXPECT_GT(rows[2].peak_live_bytes, rows[0].peak_live_bytes);
}

TEST(CompiledStepTest, ShardsPartitionTheConfigurations) {
  for (size_t n : {0, 1, 7, 10}) {
    std::vector<int> seen(n, 0);
    for (size_t k = 1; k <= 3; ++k) {
      SweepSlice s{k, 3, 0};
      for (size_t j = 0; j < s.Size(n); ++j) ++seen[s.Index(j)];
    }
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(seen[i], 1) << n << " " << i;
  }
}

}  // namespace
}  // namespace memsim
