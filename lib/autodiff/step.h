// SimulateStep: runs one training step symbolically — forward in graph order, backward in
// PyTorch autograd-engine order, optimizer.step(), zero_grad(set_to_none=True) — and returns
// the allocate/free stream PyTorch would issue. Storages are reference-counted like PyTorch's:
// Python names hold activations until their last forward use, autograd nodes hold what they
// save until their backward has run, grad buffers accumulate as in the engine's InputBuffer.
// Training setups (lib/autodiff/setup.h) plug into the step's hook points through
// StepConfig::setups; the caller makes them (the pipeline, with MakeSetups from
// lib/autodiff/setups/setups.h), so the engine knows the hook points only. Given fresh setups,
// a pure function of its arguments; safe to call concurrently on a shared Graph, each call
// with setups of its own.
#ifndef MEMSIM_LIB_AUTODIFF_STEP_H_
#define MEMSIM_LIB_AUTODIFF_STEP_H_

#include <vector>

#include "lib/ops/bind.h"
#include "lib/stream/events.h"
#include "lib/autodiff/optimizer.h"
#include "lib/autodiff/pipeline.h"
#include "lib/autodiff/setup.h"
#include "lib/ir/graph.h"
#include "lib/util/status.h"

namespace memsim {

struct StepConfig {
  const Profile* profile = nullptr;
  OptimizerRule optimizer = *FindOptimizer("sgd");
  bool first_step = true;        ///< --step first: optimizer state is created during this step
  std::vector<bool> frozen;      ///< per entry of Graph::parameters; empty = none frozen
  /// --accumulate K: K forward+backward passes before optimizer.step(); grads accumulate in
  /// place into .grad from the second pass on.
  int passes = 1;
  /// --steps N: N consecutive training steps, the allocator state carried across (Note
  /// [Training loop] in docs/op-rules.md); the first is a first step iff |first_step|.
  int steps = 1;
  /// --loop-holds output: the loop's `out, loss` names keep the last pass's output and loss
  /// alive until the next forward rebinds them (none: `del out, loss` after backward).
  bool loop_holds_output = false;
  /// --loop-holds step: they are a step function's locals, dropped when it returns (after
  /// optimizer.step() and zero_grad()).
  bool loop_holds_step = false;
  /// --loop-holds loss: the loop names the loss alone (`loss = loss_fn(model(x), y)`, or
  /// torchtitan's `del pred` before backward): the model's output dies after its last use.
  bool loop_drops_output = false;
  /// --zero-grad: set-to-none frees .grad after the step; zeros / none keep it (zeroed in place
  /// or not at all), so the next backward adds into it.
  enum class ZeroGrad : uint8_t { kSetToNone, kZeros, kNone } zero_grad = ZeroGrad::kSetToNone;
  /// The training setups, called at every hook point in this order. Not owned: they keep
  /// per-step state, so the caller makes a fresh set for every SimulateStep / ExplainAtEvent
  /// call (sim/simulator.cc: MakeSetups) and keeps it alive until the call returns; a set is
  /// used by one step at a time.
  std::vector<TrainingSetup*> setups;
  /// Pipeline parallel (Note [Pipeline parallel]): this rank's stage, whose schedule replaces
  /// the passes; null = the whole graph. Not owned (the plan's setup options hold it).
  const PipelineStagePlan* pipeline = nullptr;
  /// ModuleApplyOrder(g) computed once (a compiled step); empty = compute it for this step.
  std::vector<TensorId> apply_order;
};

Result<EventStream> SimulateStep(const Graph& g, const BoundGraph& bound, const StepConfig& cfg);

/// How SimulateStep records the stream (the same events either way).
struct StepRecording {
  bool names = true;  ///< false: buffers carry no names or modules (a sweep's rows need sizes and order only)
  size_t reserve_buffers = 0, reserve_events = 0;  ///< room to reserve (what an earlier run needed)
};
Result<EventStream> SimulateStep(const Graph& g, const BoundGraph& bound, const StepConfig& cfg,
                                 const StepRecording& rec);

/// Why a buffer is alive at a given moment: who holds a reference to it.
struct Retention {
  uint32_t buffer;                   ///< EventStream::buffers index
  std::vector<std::string> held_by;  ///< e.g. "saved by layer4.0.conv2 for its backward"
};

/// Re-runs the step and reports, for every buffer alive right after event |event_index| (e.g.
/// PeakReport::peak_event), what keeps it alive. Buffer ids match SimulateStep's.
std::vector<Retention> ExplainAtEvent(const Graph& g, const BoundGraph& bound, const StepConfig& cfg,
                                      size_t event_index);

}  // namespace memsim

#endif  // MEMSIM_LIB_AUTODIFF_STEP_H_
