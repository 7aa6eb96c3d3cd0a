#include "sim/pipeline.h"

#include "sim/gpus.h"

namespace memsim {

Result<RunResult> RunPipeline(const Graph& g, const RunConfig& c) {
  RunResult r;
  MEMSIM_ASSIGN_OR_RETURN(r.sim, Simulate(g, c.sim));
  MEMSIM_ASSIGN_OR_RETURN(r.alloc, SimulateAllocator(r.sim.events, c.alloc));
  return r;
}

Status ApplyGpu(const std::string& name, RunConfig* c, bool keep_capacity) {
  auto gpu = FindGpu(name);
  if (!gpu) return Status::InvalidArgument("unknown --gpu \"" + name + "\" (known: " + GpuNames() + ")");
  if (!keep_capacity) c->alloc.capacity_bytes = gpu->memory_bytes;
  if (!c->sim.cublas_workspace_bytes) c->sim.cublas_workspace_bytes = gpu->cublas_workspace_bytes;
  return Status::OK();
}

}  // namespace memsim
