// Every row of a compiled sweep (one CompiledStep per structural option set, names off, shared by
// every configuration and thread) equals the same configuration simulated alone through
// RunPipeline, the path of `memsim run` — for every zoo graph, over a grid of batches and options
// (Note [Compiled step] in docs/sweeps.md).
#include "sim/compiled.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <thread>

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
        static_cast<MemoryFigures&>(alone) = FiguresOf(*g, *r, c.alloc.capacity_bytes);
        if (alone.oom) alone.oom_message = r->alloc.oom->info.message;
      }
      EXPECT_EQ(lines[i], SweepRowLine(spec, i, alone, SweepFormat::kJsonl, true)) << file.filename() << " configuration " << i;
      ++compared;
    }
  }
  EXPECT_GE(compared, 20u * n);
}

// The figures of |c| through RunPipeline (names on, the engine), as EvaluateFigures gives them.
std::string AloneFigures(const Graph& g, const RunConfig& c) {
  auto r = RunPipeline(g, c);
  if (!r.ok()) return "error: " + std::string(r.status().message());
  return std::to_string(r->sim.peak.peak_live_bytes) + " " + std::string(PhaseName(r->sim.peak.peak_phase)) + " " +
         std::to_string(r->alloc.peak_allocated_bytes) + " " + std::to_string(r->alloc.peak_reserved_bytes) + " " +
         std::to_string(r->device.peak_device_bytes) + " " + std::string(VerdictName(r->device.verdict)) + " " +
         (r->alloc.oom ? r->alloc.oom->info.message : "");
}

std::string Figures(const Result<StepFigures>& f) {
  if (!f.ok()) return "error: " + std::string(f.status().message());
  return std::to_string(f->peak.live_bytes) + " " + std::string(PhaseName(f->peak.phase)) + " " +
         std::to_string(f->alloc.peak_allocated_bytes) + " " + std::to_string(f->alloc.peak_reserved_bytes) + " " +
         std::to_string(f->device.peak_device_bytes) + " " + std::string(VerdictName(f->device.verdict)) + " " +
         (f->alloc.oom ? f->alloc.oom->info.message : "");
}

// Note [Size schedule]: over a wide range of values (probed at a few, checked at a few more),
// every configuration evaluated from the schedule equals the engine's, for every zoo graph and
// several structural option sets; most of them are evaluated from the schedule.
TEST(SizeScheduleTest, ScheduledFiguresEqualTheEngineOverWideRanges) {
  const std::vector<int64_t> batches = {1, 2, 3, 4, 5, 6, 7, 11, 16, 23, 40, 64};
  struct Structure {
    const char* name;
    std::function<void(RunConfig*)> set;
  };
  const std::vector<Structure> structures = {
      {"cuda adam", [](RunConfig* c) { c->sim.optimizer = "adam"; }},
      {"cpu sgd accumulate 2 inplace off", [](RunConfig* c) {
         c->sim.profile = "cpu";
         c->sim.torch = "1.13";
         c->sim.accumulate = 2;
         c->sim.inplace = false;
       }},
      {"cuda adamw amp bf16 clip, 2 steps", [](RunConfig* c) {
         c->sim.optimizer = "adamw";
         c->sim.amp = "bf16";
         c->sim.clip_grad_norm = 1.0;
         c->sim.steps = 2;
       }},
      {"cuda data-parallel 3", [](RunConfig* c) {
         c->sim.parallel.data_parallel = true;
         c->sim.parallel.world = 3;
       }},
      // OOMs after the parameters (resumed from the fixed prefix's checkpoint, and again without
      // a capacity for what the step needs) and, for the largest graphs, within them.
      {"cuda sgd 1 GiB", [](RunConfig* c) { c->alloc.capacity_bytes = int64_t{1} << 30; }},
  };
  size_t scheduled = 0, compared = 0, ooms = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(MEMSIM_SOURCE_DIR) + "/graphs")) {
    if (e.path().extension() != ".json") continue;
    auto g = LoadGraph(e.path().string());
    ASSERT_TRUE(g.ok()) << g.status().message();
    for (const Structure& st : structures) {
      RunConfig base;
      base.alloc.capacity_bytes = int64_t{24} << 30;
      base.alloc.compute_ideal = false;
      st.set(&base);
      base.sim.symbols["batch"] = 1;
      CompileOptions co{{SymbolValues{"batch", batches}}, 1000};
      auto cs = CompileStep(*g, base, co);
      if (!cs.ok()) continue;  // e.g. data-parallel on a graph without a batch symbol
      for (int64_t b : batches) {
        RunConfig c = base;
        c.sim.symbols["batch"] = b;
        auto f = EvaluateFigures(**cs, c);
        scheduled += f.ok() && f->scheduled;
        ooms += f.ok() && f->scheduled && f->alloc.oom.has_value();
        ++compared;
        EXPECT_EQ(Figures(f), AloneFigures(*g, c)) << e.path().filename() << " " << st.name << " batch " << b
                                                   << (f.ok() && f->scheduled ? " (scheduled)" : "");
      }
    }
  }
  EXPECT_GE(compared, 20u * 3 * batches.size());
  EXPECT_GE(scheduled, compared / 2);
  EXPECT_GE(ooms, 20u);
}

// cs336_small's backward sums its RMSNorms' weight grads over batch·seq rows: on the cuda profile
// that reduction's global staging (Note [CUDA reduction staging]) comes and goes with the
// symbols, so no schedule covers it there (the exact path answers); the cpu profile has none.
TEST(SizeScheduleTest, SequenceAndBatchTogether) {
  auto g = LoadGraph(std::string(MEMSIM_SOURCE_DIR) + "/graphs/cs336_small.json");
  ASSERT_TRUE(g.ok());
  RunConfig base;
  base.sim.optimizer = "adamw";
  base.alloc.compute_ideal = false;
  const std::vector<int64_t> batches = {2, 3, 5, 8, 13}, seqs = {16, 17, 18, 19, 32, 100, 257};
  CompileOptions co{{SymbolValues{"batch", batches}, SymbolValues{"seq", seqs}}, 1000};
  auto cuda = CompileStep(*g, base, co);
  ASSERT_TRUE(cuda.ok());
  EXPECT_FALSE((*cuda)->schedule) << "the staging of the RMSNorm weight grads is piecewise in batch·seq";
  base.sim.profile = "cpu";
  auto cs = CompileStep(*g, base, co);
  ASSERT_TRUE(cs.ok());
  ASSERT_TRUE((*cs)->schedule) << (*cs)->no_schedule;
  for (int64_t b : batches)
    for (int64_t s : seqs) {
      RunConfig c = base;
      c.sim.symbols["batch"] = b;
      c.sim.symbols["seq"] = s;
      auto f = EvaluateFigures(**cs, c);
      EXPECT_TRUE(f.ok() && f->scheduled);
      EXPECT_EQ(Figures(f), AloneFigures(*g, c)) << "batch " << b << " seq " << s;
    }
}

TEST(SizeScheduleTest, AValueTheGraphRefusesIsNotCovered) {
  // GPT-2's learned positions stop at 1024: the check at 4096 fails, the range ends below it and
  // 4096 takes the exact path, with the engine's error.
  auto g = LoadGraph(std::string(MEMSIM_SOURCE_DIR) + "/graphs/nanogpt_gpt2_small.json");
  ASSERT_TRUE(g.ok());
  RunConfig base;
  base.sim.symbols["batch"] = 1;
  base.alloc.compute_ideal = false;
  const std::vector<int64_t> seqs = {8, 9, 10, 11, 64, 512, 1024, 4096};
  auto cs = CompileStep(*g, base, CompileOptions{{SymbolValues{"seq", seqs}}, 1000});
  ASSERT_TRUE(cs.ok());
  ASSERT_TRUE((*cs)->schedule) << (*cs)->no_schedule;
  for (int64_t s : seqs) {
    RunConfig c = base;
    c.sim.symbols["seq"] = s;
    auto f = EvaluateFigures(**cs, c);
    EXPECT_EQ(f.ok() && f->scheduled, s <= 1024) << s;
    EXPECT_EQ(Figures(f), AloneFigures(*g, c)) << "seq " << s;
  }
}

// An unchecked schedule (fit's, Note [Fit search]) costs the probes only and covers up to the
// largest value on trust; ConfirmScheduled finds where it is wrong (GPT-2 beyond 1024 positions).
TEST(SizeScheduleTest, AnUncheckedScheduleIsConfirmedWhereItIsUsed) {
  auto g = LoadGraph(std::string(MEMSIM_SOURCE_DIR) + "/graphs/nanogpt_gpt2_small.json");
  ASSERT_TRUE(g.ok());
  RunConfig base;
  base.sim.symbols["batch"] = 1;
  base.alloc.compute_ideal = false;
  auto cs = CompileStep(*g, base, CompileOptions{{SymbolValues{"seq", {8, 9, 10, 11, 1024, 4096}}}, 1000, /*checked=*/false});
  ASSERT_TRUE(cs.ok());
  ASSERT_TRUE((*cs)->schedule) << (*cs)->no_schedule;
  EXPECT_FALSE((*cs)->schedule->checked());
  EXPECT_EQ((*cs)->schedule->runs(), 4u) << "the probes only";
  RunConfig c = base;
  c.sim.symbols["seq"] = 1024;
  EXPECT_TRUE(ConfirmScheduled(**cs, c));
  auto f = EvaluateFigures(**cs, c);
  ASSERT_TRUE(f.ok() && f->scheduled);
  EXPECT_EQ(Figures(f), AloneFigures(*g, c));
  c.sim.symbols["seq"] = 4096;
  EXPECT_TRUE(EvaluateFigures(**cs, c)->scheduled) << "covered on trust";
  EXPECT_FALSE(ConfirmScheduled(**cs, c)) << "the engine refuses 4096 positions";
  c.sim.symbols["seq"] = 1;
  EXPECT_TRUE(ConfirmScheduled(**cs, c)) << "below the window: the exact path, nothing to confirm";
}

TEST(SizeScheduleTest, FewConfigurationsAreNotWorthASchedule) {
  auto g = LoadGraph(std::string(MEMSIM_SOURCE_DIR) + "/graphs/mlp.json");
  ASSERT_TRUE(g.ok());
  auto cs = CompileStep(*g, RunConfig{}, CompileOptions{{SymbolValues{"batch", {1, 2, 3}}}, 3});
  ASSERT_TRUE(cs.ok());
  EXPECT_FALSE((*cs)->schedule);
  EXPECT_NE((*cs)->no_schedule.find("fewer configurations"), std::string::npos);
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

// The training setups keep per-step state (ZeRO partitions and buckets, checkpoint regions, the
// GradScaler's scale, ...): the pipeline makes a fresh set for every simulated step, so one
// CompiledStep evaluated on several threads at once gives, every time, what the configuration
// gives alone (SimPlan::setup is data; the setup objects are never shared).
TEST(CompiledStepTest, EveryEvaluationGetsTrainingSetupsOfItsOwn) {
  auto g = LoadGraph(std::string(MEMSIM_SOURCE_DIR) + "/graphs/resnet18.json");
  ASSERT_TRUE(g.ok()) << g.status().message();
  RunConfig c;
  c.sim.symbols["batch"] = 4;
  c.sim.optimizer = "adam";
  c.sim.amp = "fp16";  // autocast and the GradScaler
  c.sim.clip_grad_norm = 1;
  c.sim.checkpoint_globs = {"layer?.?"};
  c.sim.parallel.zero_stage = 2;
  c.sim.parallel.world = 2;
  c.sim.explain = true;  // the step re-run for the explanations, with setups of its own too
  auto alone = RunPipeline(*g, c);
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  ASSERT_FALSE(alone->sim.at_peak.empty());
  auto cs = CompileStep(*g, c);
  ASSERT_TRUE(cs.ok()) << cs.status().message();
  std::vector<std::optional<Result<RunResult>>> runs(8);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (size_t k = t; k < runs.size(); k += 4) runs[k].emplace(EvaluateStep(**cs, c));
    });
  for (std::thread& t : threads) t.join();
  for (const auto& r : runs) {
    ASSERT_TRUE(r && r->ok());
    const RunResult& x = **r;
    EXPECT_EQ(x.sim.events.events.size(), alone->sim.events.events.size());
    EXPECT_EQ(x.sim.events.buffers.size(), alone->sim.events.buffers.size());
    EXPECT_EQ(x.sim.peak.peak_live_bytes, alone->sim.peak.peak_live_bytes);
    EXPECT_EQ(x.sim.peak.peak_event, alone->sim.peak.peak_event);
    EXPECT_EQ(x.alloc.peak_reserved_bytes, alone->alloc.peak_reserved_bytes);
    ASSERT_EQ(x.sim.at_peak.size(), alone->sim.at_peak.size());
    for (size_t i = 0; i < x.sim.at_peak.size(); ++i) EXPECT_EQ(x.sim.at_peak[i].held_by, alone->sim.at_peak[i].held_by);
  }
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
