// Compile once, evaluate many (Note [Compiled step] in docs/sweeps.md). A CompiledStep is what
// one structural option set (graph, optimizer, freezing, in-place, checkpointing, accumulation,
// clipping, foreach, profile, workspaces, device) fixes before any size is known: the resolved
// profile and optimizer, the frozen parameters, the checkpointed modules, the training setups'
// options and the device overhead, all validated once. EvaluateStep then runs one
// configuration: bind the symbols, run the step engine (every event of every setup, sizes
// exact), analyse the peak and run the allocator. RunPipeline (and so `run`) is CompileStep +
// EvaluateStep, the sweep compiles each structural option set once and evaluates every
// configuration of it; both are the same code. Given the symbols a sweep or a fit varies,
// CompileStep also builds the step's size schedule (sim/schedule.h, Note [Size schedule]):
// EvaluateFigures then evaluates a configuration as sizes + allocator, without the engine.
#ifndef MEMSIM_SIM_COMPILED_H_
#define MEMSIM_SIM_COMPILED_H_

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/util/status.h"
#include "sim/device.h"
#include "sim/pipeline.h"
#include "sim/schedule.h"
#include "sim/simulator.h"

namespace memsim {

/// The configuration-independent half of a RunConfig, resolved and validated.
struct CompiledStep {
  const Graph* graph = nullptr;
  SimPlan sim;
  std::optional<DeviceOverhead> overhead;  ///< cuda profile: context and library memory
  /// The stream sizes of the last evaluation (reserved up front by the next ones).
  mutable std::atomic<size_t> buffers_hint{0}, events_hint{0};
  /// The size schedule over the varied symbols (null: every configuration runs the engine), the
  /// symbol values it does not vary, and why there is none.
  std::shared_ptr<const SizeSchedule> schedule;
  std::map<std::string, int64_t> fixed_symbols;
  std::string no_schedule;
  std::unique_ptr<StreamPool> streams;
  /// The allocator's state after the schedule's fixed prefix, per allocator options.
  std::unique_ptr<CheckpointCache> checkpoints;
};

/// The symbols a sweep or fit will vary, and how many configurations it will evaluate per
/// compiled step (a schedule is built only when it costs fewer engine runs than they do).
struct CompileOptions {
  std::vector<SymbolValues> vary;
  size_t configurations = 0;
  /// false: the schedule gets no check runs, and whoever keeps an answer from it confirms it
  /// with ConfirmScheduled (fit confirms the two values around its answer).
  bool checked = true;
};

/// Validates and resolves everything of |c| that does not depend on the symbol values (an
/// unknown optimizer or profile, a glob that matches nothing, ...). |g| must outlive the result.
Result<std::shared_ptr<const CompiledStep>> CompileStep(const Graph& g, const RunConfig& c,
                                                        const CompileOptions& co = {});

/// How much of the result EvaluateStep builds.
struct EvalOptions {
  bool names = true;                  ///< buffer names and modules (reports); a sweep row needs none
  const BoundGraph* bound = nullptr;  ///< the graph bound with these symbols already (a cache), or null
};

/// Runs configuration |c| (whose structural options |cs| was compiled from).
Result<RunResult> EvaluateStep(const CompiledStep& cs, const RunConfig& c, const EvalOptions& eo = {});

/// What a sweep row or a fit needs of one configuration.
struct StepFigures {
  PeakPoint peak;         ///< of the live bytes
  AllocatorReport alloc;  ///< without the ideal packing
  DeviceLevel device;
  bool scheduled = false;  ///< evaluated from the size schedule
};
/// |c|'s figures: from |cs|'s size schedule when it covers |c|'s symbol values, else by
/// EvaluateStep (names off). The same numbers either way (tests/sim/compiled_test.cc).
Result<StepFigures> EvaluateFigures(const CompiledStep& cs, const RunConfig& c);

/// |c|'s peak live bytes from |cs|'s size schedule alone (no allocator); nullopt when the
/// schedule does not cover |c|. No allocator can hold them in less: a bound for fit.
std::optional<int64_t> ScheduledPeakLive(const CompiledStep& cs, const RunConfig& c);
/// The bytes the allocator may reserve for |c|: its capacity less the device overhead (0: none).
int64_t AllocatorCapacity(const CompiledStep& cs, const RunConfig& c);
/// Whether EvaluateFigures(cs, c) is what the exact path gives: true when |c| does not take the
/// size schedule, else one engine run at |c| compared with the schedule (SizeSchedule::Confirm).
bool ConfirmScheduled(const CompiledStep& cs, const RunConfig& c);

}  // namespace memsim

#endif  // MEMSIM_SIM_COMPILED_H_
