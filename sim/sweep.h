// Sweeps: many configurations of one graph, simulated in parallel with oneTBB. The graph is
// parsed once and shared read-only; each configuration binds its own symbols, runs its own step
// and allocator, and writes its row at its own index, so the output is the same bytes whatever
// the thread count. Also FitBatch: the largest batch that fits a device.
#ifndef MEMSIM_SIM_SWEEP_H_
#define MEMSIM_SIM_SWEEP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/util/status.h"
#include "sim/allocator/simulate.h"
#include "sim/simulator.h"

namespace memsim {

struct SweepConfig {
  SimOptions sim;
  AllocatorOptions alloc;
};

struct SweepRow {
  Status status;                 ///< not OK: the configuration is invalid (message says why)
  int64_t peak_live_bytes = 0;
  Phase peak_phase = Phase::kSetup;
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  bool oom = false;              ///< a simulated out-of-memory (capacity given)
  std::string oom_message;
};

/// Simulates every configuration; |threads| = 0 lets oneTBB choose.
std::vector<SweepRow> RunSweep(const Graph& g, const std::vector<SweepConfig>& configs, int threads);

/// Simulates one configuration (what RunSweep runs per row).
SweepRow RunOne(const Graph& g, const SweepConfig& config);

struct FitResult {
  int64_t max_batch = 0;         ///< 0: not even batch 1 fits
  SweepRow at_max;               ///< the row for max_batch (if > 0)
  SweepRow above;                ///< the row for max_batch + 1 (the first that does not fit)
  int evaluated = 0;             ///< configurations simulated
};

/// Largest value of the symbol "batch" in [1, limit] for which |base| (with a capacity) does not
/// run out of memory, assuming memory grows with the batch: doubling, then bisection.
Result<FitResult> FitBatch(const Graph& g, const SweepConfig& base, int64_t limit);

}  // namespace memsim

#endif  // MEMSIM_SIM_SWEEP_H_
