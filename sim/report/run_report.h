// The report of one simulated configuration (`memsim run`, the Python module): a typed value
// built once from the run's result, rendered to JSON (stable key order, for tools and golden
// tests) and to text (for people). Pure functions.
#ifndef MEMSIM_SIM_REPORT_RUN_REPORT_H_
#define MEMSIM_SIM_REPORT_RUN_REPORT_H_

#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/ir/compiled_recompute.h"
#include "sim/figures.h"
#include "sim/pipeline.h"
#include "sim/report/rank_report.h"
#include "sim/report/recorded_report.h"

namespace memsim {

/// One tensor alive at the peak.
struct TensorAtPeak {
  std::string name;
  int64_t bytes = 0;
  Category category = Category::kActivation;
  std::string op, module;
  std::vector<std::string> held_by;  ///< with --explain
  bool explained = false;
};

/// A compiled region's backward buffers that hold recomputed forward values (--explain).
struct RecomputedInRegion {
  std::string region;
  std::vector<RecomputedBuffer> buffers;
};

/// The simulated OOM with its tensor, op and phase named (where the capacity-limited allocator
/// first fails; the figures are in RunReport::figures).
struct OomReport {
  std::string tensor, category, op, module, phase;
};

struct RunReport {
  std::string model;
  // The configuration.
  std::map<std::string, int64_t> symbols;
  std::string optimizer, step, profile, torch, inplace_activations;
  std::string alloc_conf_env;  ///< where the release reads the allocator options (Profile::alloc_conf_env)
  /// What the reader should know about this run (a graph exported under another release).
  std::vector<std::string> warnings;
  int64_t frozen_parameters = 0;
  // The model.
  int64_t parameter_count = 0, trainable_parameters = 0, parameter_bytes = 0;
  std::string gpu;  ///< --gpu's name ("" : none)
  /// The figures every report shares (sim/figures.h): peaks the step would need, the OOM flag
  /// and op, the verdict.
  MemoryFigures figures;
  std::string peak_op;  ///< the op at the live peak
  int64_t setup_bytes = 0, final_bytes = 0;
  /// Host-side bytes beyond the device at their peak (EventStream::host_bytes): save_on_cpu's
  /// copies, paged optimizer state in unified memory; reported when non-zero.
  int64_t host_bytes = 0;
  std::array<int64_t, kNumPhases> phase_peaks{};
  std::array<int64_t, kNumCategories> breakdown_at_peak{};
  std::vector<TensorAtPeak> top_tensors_at_peak;
  /// With --explain: what each compiled region recomputes in backward (Note [Compiled regions]).
  std::vector<RecomputedInRegion> recomputed;
  size_t tensors_alive_at_peak = 0;
  /// --steps N (N > 1): per step, the peak live bytes and the live bytes at its end (the first
  /// step's spike vs the steady state); empty for one step.
  std::vector<int64_t> step_peaks, step_end_bytes;
  std::string amp, dtype;  ///< --amp / --dtype when given ("" otherwise)
  /// The setup options that differ from their defaults (NonDefaultSetup): checkpointing,
  /// accumulation, clipping, --foreach, steps, parallelism, ...
  std::vector<std::pair<std::string, std::string>> setup;
  int steps = 1;  ///< --steps N
  std::string lora;        ///< the LoRA configuration the graph runs with (Graph::lora; "" = none)
  size_t lora_adapters = 0;  ///< the Linear modules with an adapter
  std::string fp8;  ///< the float8 Linears' spec (Graph::fp8; "" = none)
  size_t fp8_linears = 0;
  std::string quantized_base;  ///< the quantized base weights (Graph::quantized_base; "" = none)
  size_t quantized_linears = 0;  ///< the Linear weights quantized
  /// Ops on recorded rules (measured by the exporter) and their share of the peak; unset: none.
  std::optional<RecordedRulesReport> recorded_rules;
  // The allocator model.
  AllocatorReport allocator;
  std::optional<OomReport> oom;
  // The whole device (cuda profile).
  DeviceLevel device;
  // Several ranks (--ddp, --zero): every distinct rank; the figures above are rank 0's.
  std::optional<RanksReport> ranks;
};

/// Builds the report of |r|; |top| limits the tensor list.
RunReport MakeRunReport(const Graph& g, const RunConfig& c, const RunResult& r, int top);

/// The `memsim run --json` document.
nlohmann::ordered_json ToJson(const RunReport& r);
/// The text form of the same report.
std::string ToText(const RunReport& r);

/// The event stream as text, one line per event: `A|F <phase> <bytes> <buffer> <category>`.
std::string EventsText(const EventStream& s);

}  // namespace memsim

#endif  // MEMSIM_SIM_REPORT_RUN_REPORT_H_
