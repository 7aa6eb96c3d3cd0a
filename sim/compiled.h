// Compile once, evaluate many (Note [Compiled step] in docs/sweeps.md). A CompiledStep is what
// one structural option set (graph, optimizer, freezing, in-place, checkpointing, accumulation,
// clipping, foreach, profile, workspaces, device) fixes before any size is known: the resolved
// profile and optimizer, the frozen parameters, the checkpointed modules, the training setups'
// options and the device overhead, all validated once. EvaluateStep then runs one
// configuration: bind the symbols, run the step engine (every event of every setup, sizes
// exact), analyse the peak and run the allocator. RunPipeline (and so `run`) is CompileStep +
// EvaluateStep, the sweep compiles each structural option set once and evaluates every
// configuration of it; both are the same code.
#ifndef MEMSIM_SIM_COMPILED_H_
#define MEMSIM_SIM_COMPILED_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/util/status.h"
#include "sim/device.h"
#include "sim/simulator.h"

namespace memsim {

struct RunConfig;
struct RunResult;

/// The configuration-independent half of a RunConfig, resolved and validated.
struct CompiledStep {
  const Graph* graph = nullptr;
  SimPlan sim;
  std::optional<DeviceOverhead> overhead;  ///< cuda profile: context and library memory
  /// The stream sizes of the last evaluation (reserved up front by the next ones).
  mutable std::atomic<size_t> buffers_hint{0}, events_hint{0};
};

/// Validates and resolves everything of |c| that does not depend on the symbol values (an
/// unknown optimizer or profile, a glob that matches nothing, ...). |g| must outlive the result.
Result<std::shared_ptr<const CompiledStep>> CompileStep(const Graph& g, const RunConfig& c);

/// How much of the result EvaluateStep builds.
struct EvalOptions {
  bool names = true;                  ///< buffer names and modules (reports); a sweep row needs none
  const BoundGraph* bound = nullptr;  ///< the graph bound with these symbols already (a cache), or null
};

/// Runs configuration |c| (whose structural options |cs| was compiled from).
Result<RunResult> EvaluateStep(const CompiledStep& cs, const RunConfig& c, const EvalOptions& eo = {});

}  // namespace memsim

#endif  // MEMSIM_SIM_COMPILED_H_
