// Sweeps: the cartesian product of configuration axes over one graph, simulated in parallel
// with oneTBB through the run pipeline. The graph is parsed once and shared read-only; each
// configuration writes its row at its own index, so the output is the same bytes whatever the
// thread count. LargestRankRow: the row of the rank that needs the most. (fit: sim/fit.h.)
#ifndef MEMSIM_SIM_SWEEP_H_
#define MEMSIM_SIM_SWEEP_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/util/status.h"
#include "sim/compiled.h"
#include "sim/figures.h"
#include "sim/pipeline.h"

namespace memsim {

/// One axis of a sweep: its values (as labels) and how value i sets a configuration.
struct SweepAxis {
  std::string name;                 ///< "batch", "optimizer", a symbol name, ...
  std::vector<std::string> labels;  ///< one per value, in the order given
  std::function<void(size_t, RunConfig*)> apply;
  bool numeric = false;             ///< labels are integers (JSON writes numbers)
  /// Sets a symbol value only (batch, seq, ...): configurations that differ only in such axes
  /// share one compiled step (Note [Compiled step] in docs/sweeps.md). Any other axis may change
  /// the step's structure.
  bool symbol = false;
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

/// One configuration's figures (sim/figures.h: what it would need, whether and where it runs out
/// of memory), or why it is invalid.
struct SweepRow : MemoryFigures {
  Status status;                 ///< not OK: the configuration is invalid (message says why)
  std::string oom_message;       ///< PyTorch's message for the OOM (or why a fit search stopped)
  int rank = 0;                  ///< the rank the row is of: the largest (LargestRankRow)
};

/// Simulates one configuration (what RunSweep runs per row).
SweepRow RunOne(const Graph& g, const RunConfig& config);
/// The row of |config|, evaluated with |cs| compiled from its structural options.
SweepRow RowOf(const CompiledStep& cs, const RunConfig& config);

/// The row of |c|; when its ranks can hold different buffers (RanksMayDiffer: DataParallel's
/// device 0 and chunks, ZeroRedundancyOptimizer's partitions), the row of the rank with the
/// largest peak reserved. |step| gives the compiled step of a rank's configuration.
SweepRow LargestRankRow(const RunConfig& c, const std::function<Result<const CompiledStep*>(const RunConfig&)>& step);
/// |rank0|, rank 0's row of |c|, or the row of rank 1..world-1 (each from |row_of|) with a larger
/// peak reserved, its `rank` set: the loop LargestRankRow and the planner share.
SweepRow LargestOfRanks(const RunConfig& c, SweepRow rank0, const std::function<SweepRow(const RunConfig&)>& row_of);

/// The rows of one sweep: each structural option set (the picks of the axes that are not
/// symbols) is compiled once, on first use, and shared by every configuration and thread.
class SweepEvaluator {
 public:
  SweepEvaluator(const Graph& g, const SweepSpec& spec);
  /// Configuration |i| of the spec.
  SweepRow Row(size_t i);

 private:
  const Graph& g_;
  const SweepSpec& spec_;
  CompileOptions vary_;  ///< the symbol axes
  // One compiled step per structural option set (and rank), compiled once by the first row that
  // needs it, outside the map's lock: different sets compile in parallel.
  struct Compiled {
    std::once_flag once;
    Result<std::shared_ptr<const CompiledStep>> step = Status::Internal("not compiled");
  };
  std::mutex mu_;  // guards the map only
  std::map<std::vector<size_t>, std::shared_ptr<Compiled>> compiled_;
};
/// Simulates every configuration; |threads| = 0 lets oneTBB choose.
std::vector<SweepRow> RunSweep(const Graph& g, const std::vector<RunConfig>& configs, int threads);

/// --threads N: 0 (every core) up to 4 × the cores (at least 64). The streamed sweep keeps a few
/// rows in flight per thread, so an unbounded count would be unbounded memory.
Status CheckThreads(int threads);

/// The configurations of a sweep one process runs: shard K of N (1-based) holds every index i
/// with i % N == K - 1, in increasing order; the first |skip| of them are done already (--resume).
struct SweepSlice {
  size_t shard = 1, shards = 1;
  size_t skip = 0;
  /// How many of |n| configurations shard K holds.
  size_t Size(size_t n) const { return n / shards + (shard - 1 < n % shards ? 1 : 0); }
  /// The configuration index of the shard's |k|-th configuration.
  size_t Index(size_t k) const { return shard - 1 + k * shards; }
};

/// Streams the configurations of |slice| (out of |n| of |spec|) in index order: rows are
/// simulated in parallel a few at a time and handed to |sink| in order as soon as every earlier
/// one is done, so memory does not grow with the number of configurations. |progress| (if set)
/// gets the number of rows done after each batch of rows. Stops at the first error of |sink|.
Status StreamSweep(const Graph& g, const SweepSpec& spec, size_t n, const SweepSlice& slice, int threads,
                   const std::function<Status(size_t index, const SweepRow& row)>& sink,
                   const std::function<void(size_t done)>& progress = {});

}  // namespace memsim

#endif  // MEMSIM_SIM_SWEEP_H_
