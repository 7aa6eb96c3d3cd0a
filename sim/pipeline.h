// The run pipeline: one configuration of one graph → the simulated step (bind, autodiff, event
// stream, peak analysis) and the allocator model run once over its stream. Every command
// (run, sweep, fit, advise, timelines) and the Python module go through RunPipeline, so one
// configuration gives the same numbers wherever it is asked for. The graph is shared
// read-only: configurations can run concurrently.
//
// On the cuda profile the whole device is modelled too (sim/device.h): the CUDA context and
// library memory outside the caching allocator are taken off the capacity the allocator may
// reserve (as on a real device, where cudaMalloc fails once the device is full), and the
// device used level (nvidia-smi) = peak reserved + that overhead, with its range and verdict.
#ifndef MEMSIM_SIM_PIPELINE_H_
#define MEMSIM_SIM_PIPELINE_H_

#include <string>
#include <string_view>

#include "lib/ir/graph.h"
#include "lib/util/status.h"
#include "sim/allocator/simulate.h"
#include "sim/device.h"
#include "sim/simulator.h"

namespace memsim {

/// Everything one simulated configuration depends on.
struct RunConfig {
  SimOptions sim;          ///< the step: symbols, optimizer, profile, freezing, ...
  AllocatorOptions alloc;  ///< the allocator model, its settings and the whole device's capacity
  ContextOptions device;   ///< the GPU's architecture and --context-bytes
  /// Also simulate the cuDNN workspace bounds (policies none and max) for the device-used range
  /// when the workspace policy is typical and the model has convolutions (costs two more runs).
  /// On by default, so that run, sweep, advise and fit give the same verdict; fit turns it off
  /// for the values it only needs a yes or no for.
  bool workspace_range = true;
  /// After a simulated out-of-memory, run the allocator again without a capacity: the report's
  /// peaks are then what the step would need (Note [Would need] in docs/cli.md). `fit` turns it
  /// off for the values it only needs a yes or no for (their peaks stop at the OOM).
  bool need_after_oom = true;
};

enum class Verdict : uint8_t { kNoCapacity, kFits, kDoesNotFit, kUncertain };
/// "fits", "does not fit", "within the uncertainty" ("" without a capacity).
std::string_view VerdictName(Verdict v);

/// What nvidia-smi would show (cuda profile only).
struct DeviceLevel {
  bool modelled = false;          ///< false on the cpu profile
  DeviceOverhead overhead;        ///< context and library memory outside the allocator
  int64_t capacity_bytes = 0;     ///< the whole device (0: none given)
  int64_t peak_device_bytes = 0;  ///< peak reserved + overhead
  int64_t low_bytes = 0, high_bytes = 0;  ///< the range the unknowns imply
  std::string workspace_policy;   ///< the cuDNN workspace policy simulated
  Verdict verdict = Verdict::kNoCapacity;
};

struct RunResult {
  SimResult sim;           ///< bound graph, event stream, peak, explanations
  /// What the allocator model made of the stream: its peaks are what the step would need (after
  /// an OOM, the run without a capacity), |oom| where the capacity-limited run failed.
  AllocatorReport alloc;
  DeviceLevel device;      ///< the whole device
};

/// The allocator options whose run gave |r|'s peaks: the device's capacity less the CUDA context
/// and library memory, or no capacity after an OOM (what a second pass over |r|'s stream must
/// use to agree with it).
AllocatorOptions EffectiveAllocatorOptions(const RunConfig& c, const RunResult& r);

/// Simulates |c|. Errors: an invalid configuration (message says why).
Result<RunResult> RunPipeline(const Graph& g, const RunConfig& c);

/// --gpu NAME: the device's memory as the capacity (unless |keep_capacity|), its cuBLAS
/// workspace size (unless one is set already) and its architecture (CUDA context, cuDNN
/// algorithms). Error: an unknown name, listing the known ones.
Status ApplyGpu(const std::string& name, RunConfig* c, bool keep_capacity = false);

}  // namespace memsim

#endif  // MEMSIM_SIM_PIPELINE_H_
