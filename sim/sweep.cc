#include "sim/sweep.h"

#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include <memory>

namespace memsim {

SweepRow RunOne(const Graph& g, const SweepConfig& config) {
  SweepRow row;
  auto r = Simulate(g, config.sim);
  if (!r.ok()) {
    row.status = r.status();
    return row;
  }
  row.peak_live_bytes = r->peak.peak_live_bytes;
  row.peak_phase = r->peak.peak_phase;
  AllocatorOptions ao = config.alloc;
  ao.compute_ideal = false;  // not reported per row; the lower bound costs a second pass
  auto a = SimulateAllocator(r->events, ao);
  if (!a.ok()) {
    row.status = a.status();
    return row;
  }
  row.peak_allocated_bytes = a->peak_allocated_bytes;
  row.peak_reserved_bytes = a->peak_reserved_bytes;
  if (a->oom) {
    row.oom = true;
    row.oom_message = a->oom->info.message;
  }
  return row;
}

std::vector<SweepRow> RunSweep(const Graph& g, const std::vector<SweepConfig>& configs, int threads) {
  std::vector<SweepRow> rows(configs.size());
  std::unique_ptr<tbb::global_control> limit;
  if (threads > 0)
    limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, threads);
  tbb::parallel_for(size_t{0}, configs.size(), [&](size_t i) { rows[i] = RunOne(g, configs[i]); });
  return rows;
}

Result<FitResult> FitBatch(const Graph& g, const SweepConfig& base, int64_t limit) {
  if (base.alloc.capacity_bytes <= 0) return Status::InvalidArgument("fit needs a device capacity (--gpu or --capacity)");
  if (g.FindSymbol("batch") == kNone) return Status::InvalidArgument(g.source + ": the graph has no symbol \"batch\"");
  if (limit < 1) return Status::InvalidArgument("the batch limit must be at least 1");
  FitResult fit;
  auto eval = [&](int64_t batch) -> Result<SweepRow> {
    SweepConfig c = base;
    c.sim.symbols["batch"] = batch;
    ++fit.evaluated;
    SweepRow row = RunOne(g, c);
    if (!row.status.ok()) return row.status;
    return row;
  };
  // Invariant: |lo| fits (or is 0), |hi| does not fit (or is limit + 1).
  int64_t lo = 0, hi = limit + 1;
  SweepRow lo_row, hi_row;
  for (int64_t b = 1; b <= limit; b = b > limit / 2 ? limit : b * 2) {
    MEMSIM_ASSIGN_OR_RETURN(SweepRow row, eval(b));
    if (row.oom) {
      hi = b;
      hi_row = row;
      break;
    }
    lo = b;
    lo_row = row;
    if (b == limit) break;
  }
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    MEMSIM_ASSIGN_OR_RETURN(SweepRow row, eval(mid));
    if (row.oom) {
      hi = mid;
      hi_row = row;
    } else {
      lo = mid;
      lo_row = row;
    }
  }
  fit.max_batch = lo;
  fit.at_max = lo_row;
  fit.above = hi_row;
  return fit;
}

}  // namespace memsim
