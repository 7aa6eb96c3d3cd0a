// Where the time of one configuration goes (bind, the step engine, the peak analysis, the caching
// allocator), and the compiled per-configuration path of `memsim sweep` and `memsim fit`
// (Note [Compiled step] in docs/sweeps.md): compile once, then evaluate configuration after
// configuration. tools/bench_report.py turns these into docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include "lib/io/graph_json.h"
#include "sim/allocator/simulate.h"
#include "sim/compiled.h"
#include "sim/fit.h"
#include "sim/sweep.h"

namespace memsim {
namespace {

const Graph& Zoo(const char* model) {
  static std::map<std::string, Graph> graphs;
  auto it = graphs.find(model);
  if (it == graphs.end()) {
    auto g = LoadGraph(std::string(MEMSIM_SOURCE_DIR) + "/graphs/" + model + ".json");
    if (!g.ok()) std::abort();
    it = graphs.emplace(model, std::move(g).value()).first;
  }
  return it->second;
}

RunConfig Adam() {
  RunConfig c;
  c.sim.optimizer = "adam";
  c.alloc.compute_ideal = false;
  return c;
}

CompileOptions Batches1To64() {
  CompileOptions co{{SymbolValues{"batch", {}}}, 64};
  for (int64_t b = 1; b <= 64; ++b) co.vary[0].values.push_back(b);
  return co;
}

/// The compiled path as a sweep of batch 1..64 runs it: one compiled step with its size schedule
/// (Note [Size schedule]), a different batch every iteration.
void BM_CompiledConfiguration(benchmark::State& state, const char* model) {
  const Graph& g = Zoo(model);
  RunConfig c = Adam();
  auto cs = CompileStep(g, c, Batches1To64());
  if (!cs.ok()) return state.SkipWithError(cs.status().message().c_str());
  if (!(*cs)->schedule) return state.SkipWithError(("no size schedule: " + (*cs)->no_schedule).c_str());
  int64_t batch = 1;
  for (auto _ : state) {
    c.sim.symbols["batch"] = batch;
    batch = batch % 64 + 1;
    SweepRow row = RowOf(**cs, c);
    benchmark::DoNotOptimize(row.peak_reserved_bytes);
  }
  state.SetItemsProcessed(state.iterations());
}

/// The stages of one configuration, each alone (batch 32, Adam, cuda).
void BM_StageBind(benchmark::State& state, const char* model) {
  const Graph& g = Zoo(model);
  RunConfig c = Adam();
  c.sim.symbols["batch"] = 32;
  auto cs = CompileStep(g, c);
  auto b = BindingsOf(g, c.sim);
  for (auto _ : state) benchmark::DoNotOptimize(BindFor(g, (*cs)->sim, *b).ok());
}

void BM_StageStep(benchmark::State& state, const char* model, bool names) {
  const Graph& g = Zoo(model);
  RunConfig c = Adam();
  c.sim.symbols["batch"] = 32;
  auto cs = CompileStep(g, c);
  auto bound = BindFor(g, (*cs)->sim, *BindingsOf(g, c.sim));
  size_t events = 0;
  for (auto _ : state) {
    auto r = SimulatePlanned(g, (*cs)->sim, *bound, c.sim, names);
    events = r->events.events.size();
  }
  state.counters["events"] = static_cast<double>(events);
}

/// Building the size schedule of a sweep over batch 1..64 (probe and check runs of the engine).
void BM_StageScheduleBuild(benchmark::State& state, const char* model) {
  const Graph& g = Zoo(model);
  const RunConfig c = Adam();
  size_t runs = 0;
  for (auto _ : state) {
    auto cs = CompileStep(g, c, Batches1To64());
    if (!cs.ok() || !(*cs)->schedule) return state.SkipWithError("no size schedule");
    runs = (*cs)->schedule->runs();
  }
  state.counters["engine_runs"] = static_cast<double>(runs);
}

/// One configuration's sizes from the schedule (batch 32) and its live peak, no allocator.
void BM_StageScheduleSizes(benchmark::State& state, const char* model) {
  const Graph& g = Zoo(model);
  RunConfig c = Adam();
  auto cs = CompileStep(g, c, Batches1To64());
  if (!cs.ok() || !(*cs)->schedule) return state.SkipWithError("no size schedule");
  c.sim.symbols["batch"] = 32;
  for (auto _ : state) benchmark::DoNotOptimize(ScheduledPeakLive(**cs, c));
}

void BM_StageAllocator(benchmark::State& state, const char* model) {
  const Graph& g = Zoo(model);
  RunConfig c = Adam();
  c.sim.symbols["batch"] = 32;
  auto r = Simulate(g, c.sim);
  for (auto _ : state) benchmark::DoNotOptimize(SimulateAllocator(r->events, c.alloc).ok());
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(r->events.events.size()));
}

void BM_Fit(benchmark::State& state, const char* model) {
  const Graph& g = Zoo(model);
  RunConfig c;
  c.sim.optimizer = "adam";
  if (!ApplyGpu("V100-16GB", &c).ok()) return state.SkipWithError("no V100-16GB");
  for (auto _ : state) benchmark::DoNotOptimize(FitBatch(g, c, 65536).ok());
}

BENCHMARK_CAPTURE(BM_CompiledConfiguration, mlp, "mlp")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_CompiledConfiguration, resnet18, "resnet18")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_CompiledConfiguration, resnet50, "resnet50")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_CompiledConfiguration, bert_base, "bert_base")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_StageBind, resnet50, "resnet50")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_StageStep, resnet50_names, "resnet50", true)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_StageStep, resnet50_lean, "resnet50", false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_StageScheduleBuild, resnet50, "resnet50")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_StageScheduleSizes, resnet50, "resnet50")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_StageAllocator, resnet50, "resnet50")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Fit, resnet50, "resnet50")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Fit, bert_base, "bert_base")->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace memsim
