// Configurations per second of memsim's per-configuration path (bind, step, peak, caching
// allocator) on zoo graphs: the figure behind `memsim sweep` and `memsim fit`.
#include <benchmark/benchmark.h>

#include "lib/io/graph_json.h"
#include "sim/sweep.h"

namespace memsim {
namespace {

void BM_OneConfiguration(benchmark::State& state, const char* model) {
  auto g = LoadGraph(std::string(MEMSIM_SOURCE_DIR) + "/graphs/" + model + ".json");
  if (!g.ok()) {
    state.SkipWithError(g.status().message().c_str());
    return;
  }
  RunConfig c;
  c.sim.optimizer = "adam";
  c.alloc.compute_ideal = false;
  int64_t batch = 1;
  for (auto _ : state) {
    c.sim.symbols["batch"] = batch;
    batch = batch % 64 + 1;  // rebind: a different configuration every iteration
    SweepRow row = RunOne(*g, c);
    benchmark::DoNotOptimize(row.peak_reserved_bytes);
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK_CAPTURE(BM_OneConfiguration, mlp, "mlp")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_OneConfiguration, resnet18, "resnet18")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_OneConfiguration, resnet50, "resnet50")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_OneConfiguration, bert_base, "bert_base")->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace memsim
