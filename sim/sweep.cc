#include "sim/sweep.h"

#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include <memory>

namespace memsim {

Result<size_t> SweepSpec::Count(size_t limit) const {
  size_t n = 1;
  for (const SweepAxis& ax : axes) {
    if (ax.labels.empty()) return Status::InvalidArgument("sweep axis \"" + ax.name + "\" has no value");
    if (n > limit / ax.labels.size())
      return Status::InvalidArgument("the sweep has more than " + std::to_string(limit) + " configurations");
    n *= ax.labels.size();
  }
  return n;
}

std::vector<size_t> SweepSpec::Picks(size_t i) const {
  std::vector<size_t> picks(axes.size());
  for (size_t k = axes.size(); k-- > 0;) {
    picks[k] = i % axes[k].labels.size();
    i /= axes[k].labels.size();
  }
  return picks;
}

RunConfig SweepSpec::Config(size_t i) const {
  RunConfig c = base;
  std::vector<size_t> picks = Picks(i);
  for (size_t k = 0; k < axes.size(); ++k) axes[k].apply(picks[k], &c);
  return c;
}

SweepAxis IntAxis(const std::string& name, const std::vector<int64_t>& values,
                  std::function<void(int64_t, RunConfig*)> set) {
  std::vector<std::string> labels;
  for (int64_t v : values) labels.push_back(std::to_string(v));
  return {name, labels, [values, set](size_t i, RunConfig* c) { set(values[i], c); }, true};
}

SweepAxis StringAxis(const std::string& name, const std::vector<std::string>& values,
                     std::function<void(const std::string&, RunConfig*)> set) {
  return {name, values, [values, set](size_t i, RunConfig* c) { set(values[i], c); }, false};
}

SweepAxis SymbolAxis(const std::string& symbol, const std::vector<int64_t>& values) {
  return IntAxis(symbol, values, [symbol](int64_t v, RunConfig* c) { c->sim.symbols[symbol] = v; });
}

SweepRow RunOne(const Graph& g, const RunConfig& config) {
  SweepRow row;
  RunConfig c = config;
  c.alloc.compute_ideal = false;  // not reported per row; the lower bound costs a second pass
  auto r = RunPipeline(g, c);
  if (!r.ok()) {
    row.status = r.status();
    return row;
  }
  row.peak_live_bytes = r->sim.peak.peak_live_bytes;
  row.peak_phase = r->sim.peak.peak_phase;
  row.peak_allocated_bytes = r->alloc.peak_allocated_bytes;
  row.peak_reserved_bytes = r->alloc.peak_reserved_bytes;
  row.peak_device_bytes = r->device.peak_device_bytes;
  row.verdict = r->device.verdict;
  if (r->alloc.oom) {
    row.oom = true;
    row.oom_message = r->alloc.oom->info.message;
  }
  return row;
}

std::vector<SweepRow> RunSweep(const Graph& g, const std::vector<RunConfig>& configs, int threads) {
  std::vector<SweepRow> rows(configs.size());
  std::unique_ptr<tbb::global_control> limit;
  if (threads > 0)
    limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, threads);
  tbb::parallel_for(size_t{0}, configs.size(), [&](size_t i) { rows[i] = RunOne(g, configs[i]); });
  return rows;
}

Result<FitResult> FitBatch(const Graph& g, const RunConfig& base, int64_t limit) {
  if (base.alloc.capacity_bytes <= 0) return Status::InvalidArgument("fit needs a device capacity (--gpu or --capacity)");
  if (g.FindSymbol("batch") == kNone) return Status::InvalidArgument(g.source + ": the graph has no symbol \"batch\"");
  if (limit < 1) return Status::InvalidArgument("the batch limit must be at least 1");
  FitResult fit;
  auto eval = [&](int64_t batch) -> Result<SweepRow> {
    RunConfig c = base;
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
