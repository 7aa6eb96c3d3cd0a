#include "sim/pipeline.h"

#include <algorithm>

#include "sim/amp_options.h"
#include "sim/compiled.h"
#include "sim/gpus.h"

namespace memsim {
namespace {

/// |ao| with the capacity the device overhead (CUDA context, libraries) leaves the allocator.
AllocatorOptions LeftForAllocator(AllocatorOptions ao, int64_t overhead) {
  if (ao.capacity_bytes > 0) ao.capacity_bytes = std::max<int64_t>(ao.capacity_bytes - overhead, 1);
  return ao;
}

/// The allocator over |events| with the capacity the overhead leaves it.
Result<AllocatorReport> Allocate(const EventStream& events, const AllocatorOptions& ao, int64_t overhead) {
  return SimulateAllocator(events, LeftForAllocator(ao, overhead));
}

struct Bound {
  int64_t device_bytes = 0;  ///< what the step needs: after an OOM, measured without a capacity
  bool oom = false;
};

/// |a| (the allocator over |events| with the capacity |overhead| leaves) as a bound; after an OOM
/// the allocator runs again without a capacity, for what the step would need.
Result<Bound> BoundOf(const AllocatorReport& a, const EventStream& events, AllocatorOptions ao, int64_t overhead) {
  Bound b{a.peak_reserved_bytes + overhead, a.oom.has_value()};
  if (!b.oom) return b;
  ao.capacity_bytes = 0;
  ao.compute_ideal = false;
  ao.record_placement = false;
  MEMSIM_ASSIGN_OR_RETURN(AllocatorReport unlimited, SimulateAllocator(events, ao));
  b.device_bytes = unlimited.peak_reserved_bytes + overhead;
  return b;
}

/// Device used with the cuDNN workspace policy |p| and an overhead of |overhead| bytes.
Result<Bound> BoundWith(const Graph& g, const RunConfig& c, ConvWorkspacePolicy p, int64_t overhead) {
  RunConfig v = c;
  v.sim.conv_workspace_bytes.reset();
  v.sim.conv_workspace_policy = p;
  v.sim.explain = false;
  v.alloc.compute_ideal = false;
  v.alloc.record_placement = false;
  MEMSIM_ASSIGN_OR_RETURN(SimResult s, SimulateConfigured(g, v.sim));
  MEMSIM_ASSIGN_OR_RETURN(AllocatorReport a, Allocate(s.events, v.alloc, overhead));
  return BoundOf(a, s.events, v.alloc, overhead);
}

Verdict Decide(int64_t capacity, bool point_oom, const Bound& low, const Bound& high) {
  if (capacity <= 0) return Verdict::kNoCapacity;
  const bool low_fits = !low.oom && low.device_bytes <= capacity;
  const bool high_fits = !high.oom && high.device_bytes <= capacity;
  if (!point_oom && high_fits) return Verdict::kFits;
  if (!low_fits) return Verdict::kDoesNotFit;
  return Verdict::kUncertain;
}

Result<DeviceLevel> DeviceOf(const Graph& g, const RunConfig& c, const RunResult& r, const DeviceOverhead& overhead) {
  DeviceLevel d;
  d.modelled = true;
  d.overhead = overhead;
  d.capacity_bytes = c.alloc.capacity_bytes;
  d.workspace_policy = ConvWorkspacePolicyName(r.sim.profile.conv_workspace_policy);
  MEMSIM_ASSIGN_OR_RETURN(Bound point, BoundOf(r.alloc, r.sim.events, c.alloc, d.overhead.bytes));
  d.peak_device_bytes = point.device_bytes;
  const int64_t need = point.device_bytes - d.overhead.bytes;  // reserved the step needs
  Bound low{need + d.overhead.low, point.oom}, high{need + d.overhead.high, point.oom};
  const bool ranged = c.workspace_range && d.overhead.uses_cudnn_conv &&
                      r.sim.profile.conv_workspace_policy == ConvWorkspacePolicy::kTypical;
  if (ranged) {
    MEMSIM_ASSIGN_OR_RETURN(low, BoundWith(g, c, ConvWorkspacePolicy::kNone, d.overhead.low));
    MEMSIM_ASSIGN_OR_RETURN(high, BoundWith(g, c, ConvWorkspacePolicy::kMax, d.overhead.high));
  } else if (c.workspace_range && d.capacity_bytes > 0 && point.oom && d.overhead.low < d.overhead.bytes) {
    MEMSIM_ASSIGN_OR_RETURN(AllocatorReport a, Allocate(r.sim.events, c.alloc, d.overhead.low));
    MEMSIM_ASSIGN_OR_RETURN(low, BoundOf(a, r.sim.events, c.alloc, d.overhead.low));
  }
  d.low_bytes = std::min(low.device_bytes, d.peak_device_bytes);
  d.high_bytes = std::max(high.device_bytes, d.peak_device_bytes);
  d.verdict = Decide(d.capacity_bytes, point.oom, low, high);
  return d;
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

Result<std::shared_ptr<const CompiledStep>> CompileStep(const Graph& g, const RunConfig& c) {
  auto cs = std::make_shared<CompiledStep>();
  cs->graph = &g;
  MEMSIM_RETURN_IF_ERROR(PrepareSim(g, c.sim, &cs->sim));
  MEMSIM_RETURN_IF_ERROR(ApplyAmpOptions(c.sim, &cs->sim));
  if (cs->sim.profile.cuda) {
    MEMSIM_ASSIGN_OR_RETURN(DeviceOverhead overhead, EstimateOverhead(g, c.device));
    cs->overhead = std::move(overhead);
  }
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
  if (!cs.overhead) {
    MEMSIM_ASSIGN_OR_RETURN(r.alloc, SimulateAllocator(r.sim.events, c.alloc));
    return r;
  }
  MEMSIM_ASSIGN_OR_RETURN(r.alloc, Allocate(r.sim.events, c.alloc, cs.overhead->bytes));
  MEMSIM_ASSIGN_OR_RETURN(r.device, DeviceOf(g, c, r, *cs.overhead));
  return r;
}

Result<RunResult> RunPipeline(const Graph& g, const RunConfig& c) {
  MEMSIM_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledStep> cs, CompileStep(g, c));
  return EvaluateStep(*cs, c);
}

Status ApplyGpu(const std::string& name, RunConfig* c, bool keep_capacity) {
  auto gpu = FindGpu(name);
  if (!gpu) return Status::InvalidArgument("unknown --gpu \"" + name + "\" (known: " + GpuNames() + ")");
  if (!keep_capacity) c->alloc.capacity_bytes = gpu->memory_bytes;
  if (!c->sim.cublas_workspace_bytes) c->sim.cublas_workspace_bytes = gpu->cublas_workspace_bytes;
  c->device.arch = std::string(gpu->arch);
  c->sim.gpu_arch = std::string(gpu->arch);
  return Status::OK();
}

AllocatorOptions EffectiveAllocatorOptions(const RunConfig& c, const RunResult& r) {
  return r.device.modelled ? LeftForAllocator(c.alloc, r.device.overhead.bytes) : c.alloc;
}

}  // namespace memsim
