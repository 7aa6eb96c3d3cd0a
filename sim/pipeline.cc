#include "sim/pipeline.h"

#include <algorithm>

#include "sim/compiled.h"
#include "sim/gpus.h"

namespace memsim {
namespace {

/// |ao| with the capacity the device overhead (CUDA context, libraries) leaves the allocator.
AllocatorOptions LeftForAllocator(AllocatorOptions ao, int64_t overhead) {
  if (ao.capacity_bytes > 0) ao.capacity_bytes = std::max<int64_t>(ao.capacity_bytes - overhead, 1);
  return ao;
}

/// Where the allocator may resume a stream from: the checkpoints of the prefix it shares with
/// the other configurations of its size schedule (no cache: from the start).
struct Resume {
  CheckpointCache* cache = nullptr;
  size_t prefix = 0;
  Result<AllocatorReport> Simulate(const EventStream& events, const AllocatorOptions& ao) const {
    return SimulateAllocator(events, ao, cache ? cache->Get(events, prefix, ao) : nullptr);
  }
};

/// The allocator over |events| with the capacity the overhead leaves it. After an OOM (with
/// |would_need|) the report is that of the same allocator without the capacity, whose peaks are
/// what the step would need, with the capacity-limited run's OOM record and capacity (Note
/// [Would need] in docs/cli.md): no peak is ever one truncated at the OOM. Without |would_need|
/// the peaks of an OOM run stop at it (fit's yes-or-no probes only).
Result<AllocatorReport> Allocate(const EventStream& events, const AllocatorOptions& ao, int64_t overhead,
                                 const Resume& resume = {}, bool would_need = true) {
  const AllocatorOptions limited = LeftForAllocator(ao, overhead);
  MEMSIM_ASSIGN_OR_RETURN(AllocatorReport a, resume.Simulate(events, limited));
  if (!a.oom || !would_need) return a;
  AllocatorOptions unlimited = limited;
  unlimited.capacity_bytes = 0;
  MEMSIM_ASSIGN_OR_RETURN(AllocatorReport need, resume.Simulate(events, unlimited));
  need.capacity_bytes = a.capacity_bytes;
  need.oom = std::move(a.oom);
  return need;
}

struct Bound {
  int64_t device_bytes = 0;  ///< what the step needs (Allocate: without a capacity after an OOM)
  bool oom = false;
};

Bound BoundOf(const AllocatorReport& a, int64_t overhead) {
  return Bound{a.peak_reserved_bytes + overhead, a.oom.has_value()};
}

/// Device used with the cuDNN workspace policy |p| and an overhead of |overhead| bytes.
Result<Bound> BoundWith(const Graph& g, const RunConfig& c, ConvWorkspacePolicy p, int64_t overhead) {
  RunConfig v = c;
  v.sim.conv_workspace_bytes.reset();
  v.sim.conv_workspace_policy = p;
  v.sim.explain = false;
  v.alloc.compute_ideal = false;
  v.alloc.record_placement = false;
  MEMSIM_ASSIGN_OR_RETURN(SimResult s, Simulate(g, v.sim));
  MEMSIM_ASSIGN_OR_RETURN(AllocatorReport a, Allocate(s.events, v.alloc, overhead));
  return BoundOf(a, overhead);
}

Verdict Decide(int64_t capacity, bool point_oom, const Bound& low, const Bound& high) {
  if (capacity <= 0) return Verdict::kNoCapacity;
  const bool low_fits = !low.oom && low.device_bytes <= capacity;
  const bool high_fits = !high.oom && high.device_bytes <= capacity;
  if (!point_oom && high_fits) return Verdict::kFits;
  if (!low_fits) return Verdict::kDoesNotFit;
  return Verdict::kUncertain;
}

Result<DeviceLevel> DeviceOf(const Graph& g, const RunConfig& c, const Profile& profile, const EventStream& events,
                             const AllocatorReport& alloc, const DeviceOverhead& overhead, const Resume& resume = {}) {
  DeviceLevel d;
  d.modelled = true;
  d.overhead = overhead;
  d.capacity_bytes = c.alloc.capacity_bytes;
  d.workspace_policy = ConvWorkspacePolicyName(profile.conv_workspace_policy);
  const Bound point = BoundOf(alloc, d.overhead.bytes);
  d.peak_device_bytes = point.device_bytes;
  const int64_t need = point.device_bytes - d.overhead.bytes;  // reserved the step needs
  Bound low{need + d.overhead.low, point.oom}, high{need + d.overhead.high, point.oom};
  const bool ranged = c.workspace_range && d.overhead.uses_cudnn_conv &&
                      profile.conv_workspace_policy == ConvWorkspacePolicy::kTypical;
  if (ranged) {
    MEMSIM_ASSIGN_OR_RETURN(low, BoundWith(g, c, ConvWorkspacePolicy::kNone, d.overhead.low));
    MEMSIM_ASSIGN_OR_RETURN(high, BoundWith(g, c, ConvWorkspacePolicy::kMax, d.overhead.high));
  } else if (c.workspace_range && d.capacity_bytes > 0 && point.oom && d.overhead.low < d.overhead.bytes) {
    MEMSIM_ASSIGN_OR_RETURN(AllocatorReport a, Allocate(events, c.alloc, d.overhead.low, resume));
    low = BoundOf(a, d.overhead.low);
  }
  d.low_bytes = std::min(low.device_bytes, d.peak_device_bytes);
  d.high_bytes = std::max(high.device_bytes, d.peak_device_bytes);
  d.verdict = Decide(d.capacity_bytes, point.oom, low, high);
  return d;
}

// The peak of |events|' live bytes: the caching models' peak of the requested bytes, which is
// that peak when every event reached the allocator (no OOM stopped it), else FindPeak's pass.
PeakPoint LivePeak(const EventStream& events, const AllocatorReport& a) {
  if (a.oom || a.peak_requested_event < 0) return FindPeak(events);
  const MemEvent& e = events.events[static_cast<size_t>(a.peak_requested_event)];
  return PeakPoint{a.peak_requested_bytes, static_cast<size_t>(a.peak_requested_event), e.phase, e.op};
}

// The values in |c| of the symbols |sched| varies (nullopt: one is not set).
std::optional<std::vector<int64_t>> PointOf(const SizeSchedule& sched, const RunConfig& c) {
  std::vector<int64_t> p;
  for (const std::string& name : sched.symbols()) {
    auto it = c.sim.symbols.find(name);
    if (it == c.sim.symbols.end()) return std::nullopt;
    p.push_back(it->second);
  }
  return p;
}

// The symbols of |c| but those |sched| varies.
std::map<std::string, int64_t> FixedSymbols(const RunConfig& c, const SizeSchedule& sched) {
  std::map<std::string, int64_t> fixed = c.sim.symbols;
  for (const std::string& name : sched.symbols()) fixed.erase(name);
  return fixed;
}

// The engine's event stream for |o| (buffer names off): one probe of a size schedule.
Result<EventStream> ProbeStream(const Graph& g, const CompiledStep& cs, const SimOptions& o) {
  MEMSIM_ASSIGN_OR_RETURN(Bindings b, BindingsOf(g, o));
  MEMSIM_ASSIGN_OR_RETURN(BoundGraph bound, BindFor(g, cs.sim, b));
  MEMSIM_ASSIGN_OR_RETURN(EventStream es, SimulateEvents(g, cs.sim, bound, o, cs.buffers_hint.load(std::memory_order_relaxed),
                                                         cs.events_hint.load(std::memory_order_relaxed)));
  cs.buffers_hint.store(es.buffers.size(), std::memory_order_relaxed);
  cs.events_hint.store(es.events.size(), std::memory_order_relaxed);
  return es;
}

// A schedule's probe: |base| with |symbols| at the point's values.
SizeSchedule::Probe ProbeOf(const Graph& g, const CompiledStep& cs, const SimOptions& base,
                            std::vector<std::string> symbols) {
  return [&g, &cs, &base, symbols = std::move(symbols)](const std::vector<int64_t>& point) {
    SimOptions o = base;
    for (size_t k = 0; k < point.size(); ++k) o.symbols[symbols[k]] = point[k];
    return ProbeStream(g, cs, o);
  };
}

// Builds |cs|'s size schedule over |co.vary| when it pays (Note [Size schedule]).
void BuildSchedule(const Graph& g, const RunConfig& c, const CompileOptions& co, CompiledStep* cs) {
  const size_t runs = SizeSchedule::RunsNeeded(co.vary, co.checked);
  if (runs == 0 || 2 * runs > co.configurations) {
    cs->no_schedule = co.vary.empty() ? "no symbol varies" : "fewer configurations than twice the probe runs";
    return;
  }
  // Pipeline parallel binds the batch per microbatch (BindingsOf): a probe's batch need not divide.
  if (c.sim.parallel.mesh.pp > 1) {
    cs->no_schedule = "pipeline parallel (the batch is split into microbatches)";
    return;
  }
  std::vector<std::string> symbols;
  for (const SymbolValues& v : co.vary) symbols.push_back(v.symbol);
  // The budget: half the configurations (a threshold between two probes starts the window again).
  auto sched = SizeSchedule::Build(co.vary, ProbeOf(g, *cs, c.sim, std::move(symbols)), co.configurations / 2,
                                   &cs->no_schedule, co.checked);
  if (!sched) return;
  cs->schedule = std::make_shared<const SizeSchedule>(std::move(*sched));
  cs->fixed_symbols = FixedSymbols(c, *cs->schedule);
  cs->streams = std::make_unique<StreamPool>(&cs->schedule->order());
  cs->checkpoints = std::make_unique<CheckpointCache>();
}

}  // namespace

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kNoCapacity: return "";
    case Verdict::kFits: return "fits";
    case Verdict::kDoesNotFit: return "does not fit";
    case Verdict::kUncertain: return "within the uncertainty";
  }
  return "";
}

Result<std::shared_ptr<const CompiledStep>> CompileStep(const Graph& g, const RunConfig& c, const CompileOptions& co) {
  auto cs = std::make_shared<CompiledStep>();
  cs->graph = &g;
  MEMSIM_RETURN_IF_ERROR(PrepareSim(g, c.sim, &cs->sim));
  if (cs->sim.profile.cuda) {
    MEMSIM_ASSIGN_OR_RETURN(DeviceOverhead overhead, EstimateOverhead(g, c.device, c.sim.parallel));
    cs->overhead = std::move(overhead);
  }
  BuildSchedule(g, c, co, cs.get());
  return std::shared_ptr<const CompiledStep>(std::move(cs));
}

Result<RunResult> EvaluateStep(const CompiledStep& cs, const RunConfig& c, const EvalOptions& eo) {
  const Graph& g = *cs.graph;
  RunResult r;
  BoundGraph bound;
  if (eo.bound) {
    bound = *eo.bound;
  } else {
    MEMSIM_ASSIGN_OR_RETURN(Bindings b, BindingsOf(g, c.sim));
    MEMSIM_ASSIGN_OR_RETURN(bound, BindFor(g, cs.sim, b));
  }
  MEMSIM_ASSIGN_OR_RETURN(r.sim, SimulatePlanned(g, cs.sim, std::move(bound), c.sim, eo.names, cs.buffers_hint.load(std::memory_order_relaxed),
                                                 cs.events_hint.load(std::memory_order_relaxed)));
  cs.buffers_hint.store(r.sim.events.buffers.size(), std::memory_order_relaxed);
  cs.events_hint.store(r.sim.events.events.size(), std::memory_order_relaxed);
  MEMSIM_ASSIGN_OR_RETURN(r.alloc, Allocate(r.sim.events, c.alloc, cs.overhead ? cs.overhead->bytes : 0, {},
                                            c.need_after_oom));
  if (!cs.overhead) return r;
  MEMSIM_ASSIGN_OR_RETURN(r.device, DeviceOf(g, c, r.sim.profile, r.sim.events, r.alloc, *cs.overhead));
  return r;
}

namespace {

// A stream of |cs|'s pool holding the sizes of |c| from the size schedule, returned to the pool
// on destruction; empty when the schedule does not cover |c|.
class ScheduledStream {
 public:
  ScheduledStream(const CompiledStep& cs, const RunConfig& c) : cs_(cs) {
    if (!cs.schedule) return;
    std::optional<std::vector<int64_t>> point = PointOf(*cs.schedule, c);
    if (!point || !cs.schedule->Covers(*point)) return;
    if (FixedSymbols(c, *cs.schedule) != cs.fixed_symbols) return;
    s_ = cs.streams->Take();
    if (!cs.schedule->Evaluate(*point, s_.get())) {
      cs.streams->Give(std::move(s_));
      s_.reset();
    }
  }
  ~ScheduledStream() {
    if (s_) cs_.streams->Give(std::move(s_));
  }
  ScheduledStream(const ScheduledStream&) = delete;
  ScheduledStream& operator=(const ScheduledStream&) = delete;
  const EventStream* get() const { return s_.get(); }

 private:
  const CompiledStep& cs_;
  std::unique_ptr<EventStream> s_;
};

}  // namespace

Result<StepFigures> EvaluateFigures(const CompiledStep& cs, const RunConfig& c) {
  StepFigures f;
  ScheduledStream events(cs, c);
  if (events.get()) {
    f.scheduled = true;
    const Resume resume{cs.checkpoints.get(), cs.schedule->fixed_prefix()};
    MEMSIM_ASSIGN_OR_RETURN(f.alloc, Allocate(*events.get(), c.alloc, cs.overhead ? cs.overhead->bytes : 0, resume,
                                              c.need_after_oom));
    f.peak = LivePeak(*events.get(), f.alloc);
    if (cs.overhead) {
      MEMSIM_ASSIGN_OR_RETURN(f.device,
                              DeviceOf(*cs.graph, c, cs.sim.profile, *events.get(), f.alloc, *cs.overhead, resume));
    }
    return f;
  }
  MEMSIM_ASSIGN_OR_RETURN(RunResult r, EvaluateStep(cs, c, EvalOptions{/*names=*/false}));
  f.peak = PeakPoint{r.sim.peak.peak_live_bytes, r.sim.peak.peak_event, r.sim.peak.peak_phase, r.sim.peak.peak_op};
  f.alloc = std::move(r.alloc);
  f.device = std::move(r.device);
  return f;
}

std::optional<int64_t> ScheduledPeakLive(const CompiledStep& cs, const RunConfig& c) {
  ScheduledStream events(cs, c);
  if (!events.get()) return std::nullopt;
  return FindPeak(*events.get()).live_bytes;
}

bool ConfirmScheduled(const CompiledStep& cs, const RunConfig& c) {
  if (!cs.schedule) return true;
  std::optional<std::vector<int64_t>> point = PointOf(*cs.schedule, c);
  if (!point || !cs.schedule->Covers(*point) || FixedSymbols(c, *cs.schedule) != cs.fixed_symbols) return true;
  return cs.schedule->Confirm(*point, ProbeOf(*cs.graph, cs, c.sim, cs.schedule->symbols()));
}

int64_t AllocatorCapacity(const CompiledStep& cs, const RunConfig& c) {
  return LeftForAllocator(c.alloc, cs.overhead ? cs.overhead->bytes : 0).capacity_bytes;
}

Result<RunResult> RunPipeline(const Graph& g, const RunConfig& c) {
  MEMSIM_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledStep> cs, CompileStep(g, c));
  return EvaluateStep(*cs, c);
}

Status ApplyGpu(const std::string& name, RunConfig* c, bool keep_capacity) {
  auto gpu = FindGpu(name);
  if (!gpu) {
    const std::string near = NearestGpuName(name);
    return Status::InvalidArgument("unknown --gpu \"" + name + "\"" + (near.empty() ? "" : ": did you mean " + near + "?") +
                                   " (known: " + GpuNames() + ", or the name torch.cuda.get_device_name() prints)");
  }
  if (!keep_capacity) c->alloc.capacity_bytes = gpu->memory_bytes;
  if (!c->sim.cublas_workspace_bytes) c->sim.cublas_workspace_bytes = gpu->cublas_workspace_bytes;
  c->device.gpu = std::string(gpu->name);
  c->device.arch = std::string(gpu->arch);
  c->sim.gpu_arch = std::string(gpu->arch);
  c->sim.gpu_sm_count = gpu->sm_count;
  c->sim.gpu_max_threads_per_sm = gpu->max_threads_per_sm;
  return Status::OK();
}

AllocatorOptions EffectiveAllocatorOptions(const RunConfig& c, const RunResult& r) {
  AllocatorOptions ao = r.device.modelled ? LeftForAllocator(c.alloc, r.device.overhead.bytes) : c.alloc;
  if (r.alloc.oom && c.need_after_oom) ao.capacity_bytes = 0;  // the peaks are the unconstrained run's (Allocate)
  return ao;
}

}  // namespace memsim
