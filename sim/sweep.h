// Sweeps: the cartesian product of configuration axes over one graph, simulated in parallel
// with oneTBB through the run pipeline. The graph is parsed once and shared read-only; each
// configuration writes its row at its own index, so the output is the same bytes whatever the
// thread count. Also FitBatch: the largest batch that fits a device.
#ifndef MEMSIM_SIM_SWEEP_H_
#define MEMSIM_SIM_SWEEP_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/util/status.h"
#include "sim/pipeline.h"

namespace memsim {

/// One axis of a sweep: its values (as labels) and how value i sets a configuration.
struct SweepAxis {
  std::string name;                 ///< "batch", "optimizer", a symbol name, ...
  std::vector<std::string> labels;  ///< one per value, in the order given
  std::function<void(size_t, RunConfig*)> apply;
  bool numeric = false;             ///< labels are integers (JSON writes numbers)
};

/// A sweep: a base configuration and the axes varied over it (first axis slowest).
struct SweepSpec {
  RunConfig base;
  std::vector<SweepAxis> axes;

  /// Number of configurations, or an error when it exceeds |limit| (or overflows).
  Result<size_t> Count(size_t limit) const;
  /// The value index of every axis for configuration |i|.
  std::vector<size_t> Picks(size_t i) const;
  /// Configuration |i| of the product.
  RunConfig Config(size_t i) const;
};

// Axis builders shared by the CLI and the Python module.
SweepAxis IntAxis(const std::string& name, const std::vector<int64_t>& values,
                  std::function<void(int64_t, RunConfig*)> set);
SweepAxis StringAxis(const std::string& name, const std::vector<std::string>& values,
                     std::function<void(const std::string&, RunConfig*)> set);
/// The axis of symbol |symbol| (e.g. batch, seq).
SweepAxis SymbolAxis(const std::string& symbol, const std::vector<int64_t>& values);

struct SweepRow {
  Status status;                 ///< not OK: the configuration is invalid (message says why)
  int64_t peak_live_bytes = 0;
  Phase peak_phase = Phase::kSetup;
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t peak_device_bytes = 0;  ///< device used (nvidia-smi), cuda profile; 0 on cpu
  Verdict verdict = Verdict::kNoCapacity;
  bool oom = false;              ///< a simulated out-of-memory (capacity given; the whole device)
  std::string oom_message;
};

/// Simulates one configuration (what RunSweep runs per row).
SweepRow RunOne(const Graph& g, const RunConfig& config);
/// Simulates every configuration; |threads| = 0 lets oneTBB choose.
std::vector<SweepRow> RunSweep(const Graph& g, const std::vector<RunConfig>& configs, int threads);

struct FitResult {
  int64_t max_batch = 0;         ///< 0: not even batch 1 fits
  SweepRow at_max;               ///< the row for max_batch (if > 0)
  SweepRow above;                ///< the row for max_batch + 1 (the first that does not fit)
  int evaluated = 0;             ///< configurations simulated
};

/// Largest value of the symbol "batch" in [1, limit] for which |base| (with a capacity) does not
/// run out of memory, assuming memory grows with the batch: doubling, then bisection.
Result<FitResult> FitBatch(const Graph& g, const RunConfig& base, int64_t limit);

}  // namespace memsim

#endif  // MEMSIM_SIM_SWEEP_H_
