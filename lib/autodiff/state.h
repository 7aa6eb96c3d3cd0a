// The shared state of one simulated training step: every reference PyTorch holds during it
// (Python names, autograd nodes and their saved tensors, InputBuffers, .grad fields, optimizer
// state, library workspaces), the ledger that turns their drops into frees, and the training
// setups plugged into the step's hooks. The forward (forward.cc), the backward engine
// (backward.cc), the optimizer phase (step.cc) and explain (explain.cc) all work on it.
// Internal to lib/autodiff; one StepState per simulated step, never shared between threads.
#ifndef MEMSIM_LIB_AUTODIFF_STATE_H_
#define MEMSIM_LIB_AUTODIFF_STATE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "lib/autodiff/setup.h"
#include "lib/autodiff/step.h"
#include "lib/autodiff/workspace.h"
#include "lib/ops/op_rules.h"
#include "lib/stream/ledger.h"

namespace memsim {

using StorageId = Ledger::StorageId;
inline constexpr uint32_t kNoStorage = UINT32_MAX;

/// A gradient value in flight: its storage and its layout (views of grads are not contiguous).
struct Grad {
  StorageId s = kNoStorage;
  TensorMeta meta;
  /// A view the backward returned (`grad.t()`, `grad.reshape(...)`, a narrow of CatBackward): its
  /// ViewInfo keeps the base, so its storage has two owners and InputBuffer never adds into it in
  /// place (Note [InputBuffer]). A pass-through (AddBackward's `grad`) is the same tensor.
  bool view = false;
  bool defined() const { return s != kNoStorage; }
};

/// can_accumulate_inplace (Note [InputBuffer]): whether InputBuffer::accumulate adds the next grad
/// into |old| in place (2.x without a dispatch mode): a dense tensor that is no view and that
/// nobody else references (|refs|: its storage's references).
bool CanAccumulateInplace(const Profile& profile, const Grad& old, int refs);

/// The autograd node of one forward op.
struct Node {
  bool exists = false;
  RgMask rg;                          ///< bit i: input i requires grad
  std::vector<StorageId> saved;
  std::vector<bool> released;
  /// Wrapped numbers kept while saved-tensor hooks pack the rest (FwdPlan::Extra::wrapped_number).
  std::vector<StorageId> unhooked;
  /// A Function's ctx attributes (SavedRef::ctx_attribute): no SavedVariable, so release_variables
  /// leaves them; they go with the node itself when the graph is destroyed (`del out, loss`).
  std::vector<StorageId> ctx_attributes;
  std::vector<Grad> buffer;           ///< InputBuffer: one slot per output
  int deps = 0;                       ///< edges from reachable nodes not yet delivered
  /// Forward: what keeps the node alive (Note [Dead graphs]): edges from later nodes, and its
  /// outputs still named; with neither it is destroyed.
  int edges = 0;
  int names = 0;
  bool died = false;  ///< destroyed in forward (a dead graph)
  bool destroyed = false;  ///< destroyed in backward (DestroyNodes): its saved-tensor holders are gone
  /// A checkpointed node's recomputed saves from earlier graph tasks (torch.autograd.grad calls of a
  /// split backward) that it did not unpack: the checkpoint frame keeps one per task while the
  /// node's holders live, so they go with its saved tensors (Note [Activation checkpointing]).
  std::vector<StorageId> earlier_tasks;
  bool reachable = false;
};

/// torch.autograd.grad(outputs, inputs) as a pipeline stage's split backward calls it (Note
/// [Pipeline parallel]): the engine computes only the input edges |needed| marks (exec_info, the
/// paths to the inputs), keeps what the nodes saved when |retain| (retain_graph=True), lets each
/// |capture|d node's prehook keep the grads flowing into it (|captured|, one reference each),
/// and leaves the grads reaching leaves in StepState::param_buffer (returned, not accumulated).
struct GradPass {
  std::vector<RgMask> needed;              ///< per op
  bool retain = false;
  std::vector<bool> capture;               ///< per op (empty: none)
  std::vector<std::vector<Grad>> captured;  ///< per op
  /// stage_backward_weight's passes: from the captured intermediates to the parameters, where no
  /// module's backward hooks (FSDP2's pre/post_backward) lie.
  bool weights = false;
};

struct StepState {
  StepState(const Graph& graph, const BoundGraph& b, const StepConfig& c);

  const Graph& g;
  const BoundGraph& bound;
  const StepConfig& cfg;
  const Profile& profile;
  Ledger ledger;
  Phase phase = Phase::kSetup;
  bool first_step = true;               ///< the step being run creates the optimizer state
  std::vector<bool> rg;                 ///< per tensor: requires grad
  std::vector<StorageId> storage;       ///< per tensor: its storage, or kNoStorage
  std::vector<uint32_t> param_index;    ///< per tensor: index in Graph::parameters, or kNoStorage
  std::vector<bool> held;               ///< per tensor: held by the caller (`out`, `loss`)
  /// Per tensor (`out`, `loss`): the previous pass's storage the loop's name still holds until
  /// this pass rebinds it (StepConfig::loop_holds_output), or kNoStorage.
  std::vector<StorageId> held_prev;
  std::vector<Node> nodes;              ///< per op
  std::vector<Grad> param_buffer;       ///< per parameter: grads being accumulated
  std::vector<int> param_deps;          ///< per parameter: grads still to come
  std::vector<StorageId> param_grad;    ///< per parameter: its .grad
  std::vector<StorageId> states;        ///< optimizer state
  /// Leaves that require grad beyond the parameters, indexed from Graph::parameters.size() in
  /// param_index / param_buffer / param_deps / param_grad: a pipeline stage's recv buffer.
  std::vector<TensorId> extra_leaves;
  /// The backward's root (kNone: the loss) and its grad (kNoStorage: a ones-like seed), as
  /// torch.autograd.backward(stage_output, grad_tensors=...) gives them (a pipeline stage).
  TensorId backward_root = kNone;
  StorageId backward_seed = kNoStorage;
  /// The torch.autograd.grad being run (RunGrad), or null for loss.backward().
  GradPass* grad_pass = nullptr;
  /// The engine run (a loss.backward() or a torch.autograd.grad) going on or last run, counted
  /// from 1: torch.utils.checkpoint recomputes once per graph task.
  uint64_t graph_task = 0;
  /// A pipeline stage's recv buffers per microbatch: activations and output grads (kept across steps).
  std::vector<StorageId> pp_recv_act, pp_recv_grad;
  /// The microbatch slot whose autograd graph is current (a pipeline schedule keeps one per
  /// local stage and microbatch in flight; 0 otherwise): setups with per-pass state key it so.
  size_t pass_slot = 0;
  /// Storages an asynchronous collective's work holds until its output is first read
  /// (FwdPlan::HoldUntilUse): the output, the storage.
  std::vector<std::pair<TensorId, StorageId>> pending_waits;
  LibraryWorkspaces workspaces;
  const std::vector<TrainingSetup*>& setups;  ///< cfg.setups: called at every hook, in order

  /// Forgets the autograd graph and the activations of a finished forward+backward pass
  /// (what `del out, loss` leaves), before the next pass of an accumulation.
  void StartPass();
  void SetPhase(Phase p) {
    phase = p;
    ledger.set_phase(p);
  }
  RuleCtx Ctx(OpId o) const { return MakeRuleCtx(g, bound, profile, o, &rg); }
  /// The trainable parameters as the optimizer sees them (with their .grad storages).
  std::vector<OptParam> OptParams() const;
  /// Parameter |k| (Graph::parameters index) as the optimizer sees it, before setups reshape the
  /// list (OnOptimizerParams).
  OptParam OptParamOf(size_t k) const;
  /// The tensor of leaf |k| (a parameter, or an extra leaf after them).
  TensorId LeafTensor(uint32_t k) const {
    return k < g.parameters.size() ? g.parameters[k] : extra_leaves[k - g.parameters.size()];
  }
  /// Calls |hook| on every setup.
  template <typename... Args, typename... Given>
  void Hook(void (TrainingSetup::*hook)(StepState&, Args...), Given&&... args) {
    for (TrainingSetup* s : setups) (s->*hook)(*this, std::forward<Given>(args)...);
  }
};

// The phases of the step (each in its own file).
void RunForwardOp(StepState& s, OpId o);
/// The forward of op |o| alone, reading and writing tensor storages through |storage|: its
/// outputs and extras, and what its node saves (per |policy|). |recompute|: the node exists
/// already (a checkpoint's recomputation in backward): what it saves is added to it, its
/// InputBuffer is kept, and GEMMs run on the autograd thread. Python names are the caller's.
void ExecuteForwardOp(StepState& s, OpId o, std::vector<StorageId>& storage, const ForwardOpPolicy& policy,
                      bool recompute);
/// The forward pass is over: the collectives' work still pending lets go of what it held.
void FlushPendingWaits(StepState& s);
/// loss.backward() in autograd-engine order, then `del out, loss`.
void RunBackwardPass(StepState& s);
/// torch.autograd.grad from |roots| (nodes whose InputBuffers the caller filled) as |pass| says.
void RunGrad(StepState& s, const std::vector<OpId>& roots, GradPass* pass);
/// The nodes |ops| are destroyed, in that order: what they saved, their ctx attributes and
/// InputBuffers go.
void DestroyNodes(StepState& s, const std::vector<OpId>& ops);
/// `del out, loss`: the caller's names drop their references (|forget|: and no longer name a
/// storage; Note [Training loop]).
void DropCallerNames(StepState& s, bool forget);
/// Python names |ts| go (a function returns): each tensor's node may die, then its storage.
void DropNames(StepState& s, const std::vector<TensorId>& ts);
/// A pipeline stage's step: the schedule's microbatches (lib/autodiff/pipeline.cc).
void RunPipelinePasses(StepState& s);
/// The stage's recv buffers, one per microbatch (made by the first step()).
void AllocatePipelineBuffers(StepState& s);
/// CPU (1.13): what one record_function(...) region allocates and frees (Note [record_function
/// scratch]); nothing on profiles without it. optimizer.step(), zero_grad() and
/// ZeroRedundancyOptimizer.step() each run inside one.
void RecordFunctionScratch(StepState& s);
/// Who holds each storage alive now (see ExplainAtEvent).
std::vector<Retention> ExplainState(const StepState& s);

}  // namespace memsim

#endif  // MEMSIM_LIB_AUTODIFF_STATE_H_
