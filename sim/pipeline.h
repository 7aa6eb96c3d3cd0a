// The run pipeline: one configuration of one graph → the simulated step (bind, autodiff, event
// stream, peak analysis) and the allocator model run once over its stream. Every command
// (run, sweep, fit, advise, timelines) and the Python module go through RunPipeline, so one
// configuration gives the same numbers wherever it is asked for. The graph is shared
// read-only: configurations can run concurrently.
#ifndef MEMSIM_SIM_PIPELINE_H_
#define MEMSIM_SIM_PIPELINE_H_

#include <string>

#include "lib/ir/graph.h"
#include "lib/util/status.h"
#include "sim/allocator/simulate.h"
#include "sim/simulator.h"

namespace memsim {

/// Everything one simulated configuration depends on.
struct RunConfig {
  SimOptions sim;          ///< the step: symbols, optimizer, profile, freezing, ...
  AllocatorOptions alloc;  ///< the allocator model, its settings and the capacity
};

struct RunResult {
  SimResult sim;           ///< bound graph, event stream, peak, explanations
  AllocatorReport alloc;   ///< what the allocator model made of the stream
};

/// Simulates |c|. Errors: an invalid configuration (message says why).
Result<RunResult> RunPipeline(const Graph& g, const RunConfig& c);

/// --gpu NAME: the device's memory as the capacity (unless |keep_capacity|) and its cuBLAS
/// workspace size (unless one is set already). Error: an unknown name, listing the known ones.
Status ApplyGpu(const std::string& name, RunConfig* c, bool keep_capacity = false);

}  // namespace memsim

#endif  // MEMSIM_SIM_PIPELINE_H_
