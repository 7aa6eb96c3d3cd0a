#include "sim/sweep.h"

#include <thread>

#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_pipeline.h>

#include <memory>

#include "sim/ranks.h"

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
  SweepAxis ax = IntAxis(symbol, values, [symbol](int64_t v, RunConfig* c) { c->sim.symbols[symbol] = v; });
  ax.symbol = true;
  return ax;
}

SweepRow RowOf(const CompiledStep& cs, const RunConfig& config) {
  SweepRow row;
  RunConfig c = config;
  c.alloc.compute_ideal = false;  // not reported per row; the lower bound costs a second pass
  auto r = EvaluateFigures(cs, c);
  if (!r.ok()) {
    row.status = r.status();
    return row;
  }
  static_cast<MemoryFigures&>(row) = FiguresOf(cs.graph, r->peak, r->alloc, r->device, c.alloc.capacity_bytes);
  if (r->alloc.oom) row.oom_message = r->alloc.oom->info.message;
  return row;
}

SweepRow RunOne(const Graph& g, const RunConfig& config) {
  auto cs = CompileStep(g, config);
  if (!cs.ok()) {
    SweepRow row;
    row.status = cs.status();
    return row;
  }
  return RowOf(**cs, config);
}

SweepEvaluator::SweepEvaluator(const Graph& g, const SweepSpec& spec) : g_(g), spec_(spec) {
  // Every configuration of one structural option set differs only in the symbol axes: they are
  // what its size schedule varies (Note [Size schedule]).
  vary_.configurations = 1;
  for (const SweepAxis& ax : spec.axes) {
    if (!ax.symbol) continue;
    SymbolValues v{ax.name, {}};
    for (const std::string& label : ax.labels) v.values.push_back(std::stoll(label));
    vary_.vary.push_back(std::move(v));
    vary_.configurations *= ax.labels.size();
  }
}

SweepRow LargestRankRow(const RunConfig& c, const std::function<Result<const CompiledStep*>(const RunConfig&)>& step) {
  auto row_of = [&](const RunConfig& rc) {
    auto cs = step(rc);
    if (cs.ok()) return RowOf(**cs, rc);
    SweepRow row;
    row.status = cs.status();
    return row;
  };
  SweepRow row = row_of(c);
  if (!row.status.ok() || !RanksMayDiffer(c)) return row;
  return LargestOfRanks(c, std::move(row), row_of);
}

SweepRow LargestOfRanks(const RunConfig& c, SweepRow rank0, const std::function<SweepRow(const RunConfig&)>& row_of) {
  SweepRow row = std::move(rank0);
  for (int r = 1; r < c.sim.parallel.world; ++r) {
    RunConfig rc = c;
    rc.sim.parallel.rank = r;
    SweepRow x = row_of(rc);
    if (x.status.ok() && x.peak_reserved_bytes > row.peak_reserved_bytes) {
      row = std::move(x);
      row.rank = r;
    }
  }
  return row;
}

SweepRow SweepEvaluator::Row(size_t i) {
  std::vector<size_t> picks = spec_.Picks(i);
  RunConfig c = spec_.base;
  for (size_t k = 0; k < spec_.axes.size(); ++k) spec_.axes[k].apply(picks[k], &c);
  std::vector<size_t> key;
  for (size_t k = 0; k < spec_.axes.size(); ++k) key.push_back(spec_.axes[k].symbol ? SIZE_MAX : picks[k]);
  return LargestRankRow(c, [&](const RunConfig& rc) -> Result<const CompiledStep*> {
    std::vector<size_t> rank_key = key;
    rank_key.push_back(static_cast<size_t>(rc.sim.parallel.rank));
    std::shared_ptr<Compiled> slot;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto& s = compiled_[rank_key];
      if (!s) s = std::make_shared<Compiled>();
      slot = s;  // the map keeps it alive
    }
    std::call_once(slot->once, [&] { slot->step = CompileStep(g_, rc, vary_); });
    if (!slot->step.ok()) return slot->step.status();
    return slot->step.value().get();
  });
}

std::vector<SweepRow> RunSweep(const Graph& g, const std::vector<RunConfig>& configs, int threads) {
  std::vector<SweepRow> rows(configs.size());
  std::unique_ptr<tbb::global_control> limit;
  if (threads > 0)
    limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, threads);
  tbb::parallel_for(size_t{0}, configs.size(), [&](size_t i) { rows[i] = RunOne(g, configs[i]); });
  return rows;
}

Status CheckThreads(int threads) {
  const int most = std::max(64, 4 * static_cast<int>(std::thread::hardware_concurrency()));
  if (threads < 0 || threads > most)
    return Status::InvalidArgument("--threads " + std::to_string(threads) + ": expected 0 (every core) to " +
                                   std::to_string(most) + " (4 × this machine's cores)");
  return Status::OK();
}

Status StreamSweep(const Graph& g, const SweepSpec& spec, size_t n, const SweepSlice& slice, int threads,
                   const std::function<Status(size_t index, const SweepRow& row)>& sink,
                   const std::function<void(size_t done)>& progress) {
  MEMSIM_RETURN_IF_ERROR(CheckThreads(threads));
  if (slice.shards < 1 || slice.shard < 1 || slice.shard > slice.shards)
    return Status::InvalidArgument("--shard " + std::to_string(slice.shard) + "/" + std::to_string(slice.shards) +
                                   ": expected K/N with 1 <= K <= N");
  const size_t total = slice.Size(n);
  if (slice.skip > total) return Status::InvalidArgument("more rows done than the shard has");
  std::unique_ptr<tbb::global_control> limit;
  if (threads > 0)
    limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, threads);
  const int workers = threads > 0 ? threads : static_cast<int>(tbb::this_task_arena::max_concurrency());
  constexpr size_t kBatch = 16;  // rows per pipeline token: small, so the output follows closely
  struct Batch {
    size_t first = 0, count = 0;
    std::vector<SweepRow> rows;
  };
  size_t next = slice.skip;
  Status status;
  SweepEvaluator eval(g, spec);
  tbb::parallel_pipeline(
      static_cast<size_t>(workers) * 4,
      tbb::make_filter<void, std::shared_ptr<Batch>>(
          tbb::filter_mode::serial_in_order,
          [&](tbb::flow_control& fc) -> std::shared_ptr<Batch> {
            if (next >= total || !status.ok()) {
              fc.stop();
              return nullptr;
            }
            auto b = std::make_shared<Batch>();
            b->first = next;
            b->count = std::min(kBatch, total - next);
            next += b->count;
            return b;
          }) &
          tbb::make_filter<std::shared_ptr<Batch>, std::shared_ptr<Batch>>(
              tbb::filter_mode::parallel,
              [&](std::shared_ptr<Batch> b) {
                b->rows.reserve(b->count);
                for (size_t k = 0; k < b->count; ++k) b->rows.push_back(eval.Row(slice.Index(b->first + k)));
                return b;
              }) &
          tbb::make_filter<std::shared_ptr<Batch>, void>(tbb::filter_mode::serial_in_order, [&](std::shared_ptr<Batch> b) {
            for (size_t k = 0; k < b->count && status.ok(); ++k) status = sink(slice.Index(b->first + k), b->rows[k]);
            if (progress && status.ok()) progress(b->first + b->count);
          }));
  return status;
}

}  // namespace memsim
