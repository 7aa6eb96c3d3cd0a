#include "sim/plan/search.h"

#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>

#include "lib/ir/tensor_parallel.h"
#include "lib/ops/bind.h"
#include "lib/ops/profile.h"
#include "sim/device.h"
#include "sim/plan/steady.h"
#include "sim/gpus.h"
#include "sim/ranks.h"

namespace memsim {
namespace {

/// Candidates simulated per round: fixed, so that which ones are pruned does not depend on the
/// thread count.
constexpr size_t kRound = 16;

/// The dim 0 of every parameter of |g| (parameters do not depend on the batch).
std::vector<int64_t> ParameterRows(const Graph& g, const std::string& torch) {
  std::vector<int64_t> rows;
  std::optional<Profile> profile = FindProfile("cuda", torch);
  if (!profile) return rows;
  BindOptions bo;
  bo.profile = &*profile;
  Result<BoundGraph> b = BindGraph(g, g.DefaultBindings(), bo);
  if (!b.ok()) return rows;
  for (TensorId t : g.parameters) rows.push_back(b->metas[t].sizes.empty() ? 1 : b->metas[t].sizes[0]);
  return rows;
}

/// Whether the ranks of |c| run the same stream, so that rank 0 stands for all: FSDP2 (alone)
/// whose dp_shard divides every parameter's dim 0 (|rows|) — the ranks then hold shards of the
/// same rows; only an uneven dim 0 leaves the last ranks fewer (Note [FSDP2], sim/ranks.cc).
bool RanksSame(const RunConfig& c, const std::vector<int64_t>& rows) {
  const MeshDims& m = c.sim.parallel.mesh;
  if (m.dp_shard <= 1 || m.tp > 1 || m.pp > 1 || m.cp > 1 || m.ep > 1 || c.sim.parallel.zero_stage > 0 || rows.empty())
    return false;
  return std::all_of(rows.begin(), rows.end(), [&](int64_t n) { return n % m.dp_shard == 0; });
}

/// |c|'s row: the run pipeline's (names off), of the largest rank when ranks can differ (as
/// LargestRankRow), each from a few passes when that is proven the same (SteadyRow).
/// Out-of-memory candidates are not rerun without the capacity (their peaks are not reported).
SweepRow Simulate(const Graph& g, RunConfig c, const std::vector<int64_t>& rows, std::atomic<size_t>* shortened) {
  c.need_after_oom = false;
  auto row_of = [&](const RunConfig& rc) {
    bool few = false;
    SweepRow row = SteadyRow(g, rc, &few);
    if (few) shortened->fetch_add(1, std::memory_order_relaxed);
    return row;
  };
  SweepRow row = row_of(c);
  if (!row.status.ok() || !RanksMayDiffer(c) || RanksSame(c, rows)) return row;
  return LargestOfRanks(c, std::move(row), row_of);
}

/// Whether |a| comes before |b| on the front's order: faster, then smaller, then earlier.
bool FrontBefore(const PlanRow& a, const PlanRow& b) {
  const double ta = a.time.total(), tb = b.time.total();
  if (ta != tb) return ta < tb;
  if (a.row.used_bytes() != b.row.used_bytes()) return a.row.used_bytes() < b.row.used_bytes();
  return a.index < b.index;
}

/// The fitting rows no other fitting row beats (Note [Planner search]), in the front's order.
std::vector<PlanRow> FrontOf(std::vector<PlanRow> fitting) {
  std::sort(fitting.begin(), fitting.end(), FrontBefore);
  std::vector<PlanRow> front;
  for (PlanRow& r : fitting)
    if (front.empty() || r.row.used_bytes() < front.back().row.used_bytes()) front.push_back(std::move(r));
  return front;
}

/// Whether a simulated fitting row |d| proves that |c| (bound |floor_used| on its device used)
/// is not on the front: |d| is no slower and needs no more, and comes first in the front's order.
bool Dominates(const PlanRow& d, const PlanRow& c, int64_t floor_used) {
  const double td = d.time.total(), tc = c.time.total();
  if (td > tc || d.row.used_bytes() > floor_used) return false;
  return td < tc || d.row.used_bytes() < floor_used || d.index < c.index;
}

std::optional<size_t> Choose(const std::vector<PlanRow>& front, PlanObjective o) {
  if (front.empty()) return std::nullopt;
  if (o == PlanObjective::kTime) return 0;
  if (o == PlanObjective::kMemory) return front.size() - 1;
  size_t best = 0;
  auto score = [&](size_t i) { return front[i].time.total() * static_cast<double>(front[i].row.used_bytes()); };
  for (size_t i = 1; i < front.size(); ++i)
    if (score(i) < score(best)) best = i;
  return best;
}

/// Checks the request and finds the GPU: one-line errors naming the option.
Result<GpuSpec> CheckRequest(const Graph& g, const PlanRequest& r) {
  std::optional<GpuSpec> gpu = FindGpu(r.gpu);
  if (!gpu) {
    const std::string near = NearestGpuName(r.gpu);
    return Status::InvalidArgument("--gpus: unknown GPU \"" + r.gpu + "\"" + (near.empty() ? "" : ": did you mean " + near + "?") +
                                   " (known: " + GpuNames() + ")");
  }
  if (r.gpus < 1) return Status::InvalidArgument("--gpus: expected COUNTxGPU with COUNT >= 1, e.g. 8xH100-80GB");
  if (r.global_batch < 1) return Status::InvalidArgument("--global-batch must be 1 or more samples");
  if (g.FindSymbol("batch") == kNone) return Status::InvalidArgument(g.source + ": the graph has no symbol batch for the planner to vary");
  if (r.seq > 0 && g.FindSymbol("seq") == kNone) return Status::InvalidArgument("--seq: the graph has no symbol seq");
  return *gpu;
}

}  // namespace

std::string_view ObjectiveName(PlanObjective o) {
  return o == PlanObjective::kTime ? "time" : o == PlanObjective::kMemory ? "memory" : "balanced";
}

Result<PlanObjective> ParseObjective(std::string_view s) {
  if (s == "time") return PlanObjective::kTime;
  if (s == "memory") return PlanObjective::kMemory;
  if (s == "balanced") return PlanObjective::kBalanced;
  return Status::InvalidArgument("--objective \"" + std::string(s) + "\": expected time, memory or balanced");
}

namespace {

/// Every candidate's estimated time and memory floor (cheap: one binding per precision and
/// micro-batch); those whose floor exceeds |allocatable| are counted and dropped (unless
/// exhaustive). Sorted by time, then floor, then index.
std::vector<PlanRow> ScoreCandidates(const Graph& g, const PlanOptions& o, const GpuPerf& perf, int64_t allocatable,
                                     PlanResult* res) {
  const PlanModel model = PlanModelOf(g);
  const std::vector<PlanCandidate> cands = EnumerateCandidates(o.request, model);
  res->candidates = cands.size();
  CostModel cost(g, o.request, model, perf);
  std::vector<PlanRow> rows;
  for (size_t i = 0; i < cands.size(); ++i) {
    PlanRow r;
    r.index = i;
    r.candidate = cands[i];
    Result<StepTime> t = cost.TimeOf(cands[i]);
    Result<int64_t> floor = t.ok() ? cost.MemoryFloor(cands[i]) : t.status();
    if (!floor.ok()) {
      if (res->first_error.empty()) res->first_error = floor.status().message();
      ++res->invalid;
      continue;
    }
    r.time = *t;
    r.floor_bytes = *floor;
    if (!o.exhaustive && r.floor_bytes > allocatable) {
      ++res->pruned_by_floor;
      continue;
    }
    r.args = ArgsOf(cands[i], o.request, model);
    rows.push_back(std::move(r));
  }
  std::sort(rows.begin(), rows.end(), [](const PlanRow& a, const PlanRow& b) {
    if (a.time.total() != b.time.total()) return a.time.total() < b.time.total();
    if (a.floor_bytes != b.floor_bytes) return a.floor_bytes < b.floor_bytes;
    return a.index < b.index;
  });
  return rows;
}

/// Whether the search may stop before |next| (Note [Planner search]): every candidate from it
/// on is at least as slow, so the objective's answer is known — time: past |span| x the fastest
/// fitting plan; balanced: no remaining candidate's time x memory bound can beat the best.
bool Settled(const PlanOptions& o, const std::vector<PlanRow>& fitting, const PlanRow& next, int64_t min_floor_used) {
  if (o.exhaustive || fitting.empty()) return false;
  double fastest = fitting.front().time.total(), best = -1;
  for (const PlanRow& f : fitting) {
    fastest = std::min(fastest, f.time.total());
    const double score = f.time.total() * static_cast<double>(f.row.used_bytes());
    best = best < 0 ? score : std::min(best, score);
  }
  const double t = next.time.total();
  if (o.objective == PlanObjective::kTime) return o.front_span > 0 && t > fastest * std::max(1.0, o.front_span);
  if (o.objective == PlanObjective::kBalanced) return t * static_cast<double>(min_floor_used) > best;
  return false;
}

/// Simulates |rows| (sorted by time) in rounds of kRound, skipping the dominated ones and
/// stopping once the answer is settled; the fitting rows.
std::vector<PlanRow> SimulateInOrder(const Graph& g, const PlanOptions& o, std::vector<PlanRow>& rows, int64_t overhead,
                                     PlanResult* res) {
  // The graph one rank of tensor parallel degree t runs (`memsim run` rewrites it the same way
  // for --mesh tp=t, sim/options ConfigOptions::Adapt); a degree the graph refuses makes its
  // candidates invalid, with the reason.
  std::map<int, Result<Graph>> tp_graphs;
  const std::vector<int64_t> param_rows = ParameterRows(g, o.request.torch);
  for (const PlanRow& r : rows)
    if (r.candidate.tp > 1 && !tp_graphs.count(r.candidate.tp))
      tp_graphs.emplace(r.candidate.tp, ApplyTensorParallel(g, {r.candidate.tp, "layers", false}));
  // The smallest floor from each position on: what any remaining candidate needs at least.
  std::vector<int64_t> min_floor(rows.size() + 1, INT64_MAX);
  for (size_t i = rows.size(); i-- > 0;) min_floor[i] = std::min(min_floor[i + 1], rows[i].floor_bytes + overhead);
  std::vector<PlanRow> fitting;
  std::atomic<size_t> shortened{0};
  for (size_t start = 0; start < rows.size(); start += kRound) {
    if (Settled(o, fitting, rows[start], min_floor[start])) {
      res->front_exact_below_s = rows[start].time.total();
      res->beyond_horizon = rows.size() - start;
      break;
    }
    std::vector<PlanRow*> round;
    for (size_t i = start; i < std::min(rows.size(), start + kRound); ++i) {
      const int64_t floor_used = rows[i].floor_bytes + overhead;
      const bool beaten = !o.exhaustive && std::any_of(fitting.begin(), fitting.end(), [&](const PlanRow& d) {
                            return Dominates(d, rows[i], floor_used);
                          });
      if (beaten) {
        ++res->pruned_dominated;
      } else {
        round.push_back(&rows[i]);
      }
    }
    tbb::parallel_for(size_t{0}, round.size(), [&](size_t k) {
      PlanRow& r = *round[k];
      Result<RunConfig> c = o.configure(r.args);
      const Result<Graph>* tg = r.candidate.tp > 1 ? &tp_graphs.at(r.candidate.tp) : nullptr;
      if (c.ok() && tg && !tg->ok()) c = tg->status();
      r.row = c.ok() ? Simulate(tg ? **tg : g, *c, param_rows, &shortened) : SweepRow{};
      if (!c.ok()) r.row.status = c.status();
    });
    for (PlanRow* r : round) {
      ++res->simulated;
      if (!r->row.status.ok()) {
        if (res->first_error.empty()) res->first_error = r->row.status.message();
        ++res->invalid;
        continue;
      }
      r->fits = !r->row.oom;
      if (r->fits) fitting.push_back(*r);
      if (o.exhaustive) res->all.push_back(*r);
    }
  }
  res->shortened = shortened.load();
  return fitting;
}

}  // namespace

Result<PlanResult> Plan(const Graph& g, const PlanOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const PlanRequest& req = o.request;
  MEMSIM_ASSIGN_OR_RETURN(GpuSpec gpu, CheckRequest(g, req));
  MEMSIM_RETURN_IF_ERROR(CheckThreads(o.threads));
  std::optional<GpuPerf> perf = FindGpuPerf(gpu.name);
  if (!perf) return Status::Internal("sim/data/gpu_perf.json has no row for " + std::string(gpu.name));
  MEMSIM_ASSIGN_OR_RETURN(DeviceOverhead overhead, EstimateOverhead(g, ContextOptions{std::string(gpu.arch), {}, {}}));

  PlanResult res;
  res.model = g.name;
  res.gpu = std::string(gpu.name);
  res.gpus = req.gpus;
  res.global_batch = req.global_batch;
  res.seq = req.seq;
  res.optimizer = req.optimizer;
  res.objective = o.objective;
  res.capacity_bytes = gpu.memory_bytes;
  std::vector<PlanRow> rows = ScoreCandidates(g, o, *perf, gpu.memory_bytes - overhead.bytes, &res);
  if (res.candidates == 0)
    return Status::InvalidArgument("--global-batch " + std::to_string(req.global_batch) +
                                   ": no data-parallel world of the --gpus divides it (and no micro-batch fits the "
                                   "axes given)");
  std::unique_ptr<tbb::global_control> limit;
  if (o.threads > 0)
    limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, o.threads);
  std::vector<PlanRow> fitting = SimulateInOrder(g, o, rows, overhead.bytes, &res);
  res.fitting = fitting.size();
  res.front = FrontOf(std::move(fitting));
  res.chosen = Choose(res.front, o.objective);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace memsim
