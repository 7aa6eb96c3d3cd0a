// The planner's search (docs/plan.md, Notes [Planner search] and [Planner bounds]): every
// candidate of the space gets its estimated step time (sim/plan/cost.h) and a proven lower bound
// of its peak memory; candidates whose bound exceeds what the allocator may reserve cannot fit
// and are dropped; the rest are simulated in order of estimated time, in fixed rounds, each
// through the run pipeline with the `memsim run` flags that set it up, and a candidate is
// skipped when an already simulated plan that fits is at least as fast and needs no more than
// its bound (it cannot be on the front). The result: the Pareto front of the plans that fit
// (peak device memory × estimated step time) and the plan the objective picks from it — the
// same whatever the thread count, and the same as simulating every candidate (exhaustive).
#ifndef MEMSIM_SIM_PLAN_SEARCH_H_
#define MEMSIM_SIM_PLAN_SEARCH_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/util/status.h"
#include "sim/plan/cost.h"
#include "sim/plan/space.h"
#include "sim/sweep.h"

namespace memsim {

/// What the plan is chosen for, among the plans on the front: the fastest (time), the smallest
/// peak device memory (memory), or the smallest product of the two (balanced).
enum class PlanObjective : uint8_t { kTime, kMemory, kBalanced };
std::string_view ObjectiveName(PlanObjective o);
Result<PlanObjective> ParseObjective(std::string_view s);

/// The `memsim run` flags (after GRAPH) → the configuration `memsim run` simulates for them: the
/// CLI's option spec (sim/options/plan_options.h), so a plan's flags are exactly what is run.
using ConfigureFn = std::function<Result<RunConfig>(const std::vector<std::string>& args)>;

struct PlanOptions {
  PlanRequest request;
  PlanObjective objective = PlanObjective::kTime;
  int threads = 0;          ///< 0: oneTBB chooses; the output does not depend on it
  bool exhaustive = false;  ///< simulate every candidate (no pruning): for tests and checks
  /// --objective time: the front is searched up to this many times the fastest fitting plan's
  /// step time (at least 1; 0: the whole front).
  double front_span = 1.25;
  ConfigureFn configure;
};

/// One candidate as the search saw it.
struct PlanRow {
  size_t index = 0;  ///< in EnumerateCandidates' order
  PlanCandidate candidate;
  std::vector<std::string> args;  ///< its `memsim run` flags
  StepTime time;
  int64_t floor_bytes = 0;        ///< the lower bound of its peak live bytes
  SweepRow row;                   ///< simulated rows only
  bool fits = false;              ///< simulated, valid, and no out-of-memory
};

struct PlanResult {
  std::string model;
  std::string gpu;
  int gpus = 1;
  int64_t global_batch = 0;
  int64_t seq = 0;                ///< 0: the graph's default
  std::string optimizer;
  PlanObjective objective = PlanObjective::kTime;
  int64_t capacity_bytes = 0;     ///< one GPU
  /// The plans that fit and no other fitting plan beats on both time and memory, fastest first.
  std::vector<PlanRow> front;
  std::optional<size_t> chosen;   ///< index into |front|; none: no plan fits
  size_t candidates = 0;          ///< in the space
  size_t simulated = 0;
  size_t fitting = 0;             ///< simulated plans that fit
  size_t pruned_by_floor = 0;     ///< their bound exceeds the capacity
  size_t pruned_dominated = 0;    ///< a simulated plan beats their bound
  /// Rank simulations of a long accumulation from their first passes (Note [Steady
  /// accumulation]); the others ran every pass.
  size_t shortened = 0;
  size_t invalid = 0;             ///< refused by the options' checks or the graph's shapes
  /// The search stopped once the objective's answer was settled: the front is exact for step
  /// times below this (0: the whole front), and |beyond_horizon| candidates were not looked at.
  double front_exact_below_s = 0;
  size_t beyond_horizon = 0;
  double seconds = 0;             ///< wall clock of the search
  std::string first_error;        ///< why the first invalid candidate was refused
  std::vector<PlanRow> all;       ///< exhaustive only: every simulated row (for checks)
};

/// Searches the plans of |o| over |g|. Errors: an unknown GPU, a global batch no world divides,
/// a graph without a batch symbol.
Result<PlanResult> Plan(const Graph& g, const PlanOptions& o);

}  // namespace memsim

#endif  // MEMSIM_SIM_PLAN_SEARCH_H_
