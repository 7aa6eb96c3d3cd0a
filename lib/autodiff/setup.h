// Training setups plug into the step engine through these hook points: each setup (gradient
// clipping, accumulation, mixed precision, checkpointing, data parallel, ZeRO, ...) is one class
// in one file that overrides the hooks it needs; the engine (step.cc, forward.cc, backward.cc)
// calls every registered setup, in order, at each point. A hook sees and may change the step's
// shared state (lib/autodiff/state.h): allocate through its ledger, hold references, ...
// Example — a setup that keeps a copy of every gradient until the optimizer step:
//   class KeepGradCopies : public TrainingSetup {
//     void OnGradReady(StepState& s, uint32_t k) override {
//       copies_.push_back(s.ledger.Alloc(s.ledger.bytes(s.param_grad[k]), "copy", Category::kTemporary));
//     }
//     void AfterOptimizerStep(StepState& s) override { for (auto c : copies_) s.ledger.Unref(c); }
//     std::vector<Ledger::StorageId> copies_;
//   };
#ifndef MEMSIM_LIB_AUTODIFF_SETUP_H_
#define MEMSIM_LIB_AUTODIFF_SETUP_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "lib/autodiff/optimizer.h"
#include "lib/ir/graph.h"

namespace memsim {

struct StepState;
struct Grad;

/// What the forward of one op will do, as setups may adjust it before it runs.
struct ForwardOpPolicy {
  bool save_for_backward = true;  ///< false: the node keeps nothing (e.g. inside a checkpoint)
  /// With save_for_backward false: saved-tensor hooks pack what the node saves (a non-reentrant
  /// checkpoint), all but a wrapped number under 2.x (Profile::wrapped_number_skips_hooks).
  bool saved_tensor_hooks = false;
  /// Per input (empty: none): the storage the op reads instead of the input's own, e.g. an
  /// autocast copy (Ledger::StorageId; UINT32_MAX = the input itself). The node saves these.
  std::vector<uint32_t> input_storage;
  /// Selective checkpointing (Note [Selective activation checkpointing]). Forward: the op's
  /// outputs, then the extras its node would save, are referenced into |sac_cache| for the
  /// recomputation. Recomputation: |sac_cached| holds them, the op allocates nothing (its kernel
  /// does not run) and its node saves from them.
  std::vector<uint32_t>* sac_cache = nullptr;
  const std::vector<uint32_t>* sac_cached = nullptr;
  /// A non-reentrant checkpoint's early stop raises in this op's pack hook before its kernel
  /// (every tensor its node packs is an input, packed before the kernel): the node saves its
  /// inputs, nothing is allocated (Note [Activation checkpointing]).
  bool stops_before_kernel = false;
  /// saved_tensors_hooks that pack each tensor the node saves (torch.autograd.graph.save_on_cpu,
  /// Note [Activation offloading]): inputs as they are saved, before the op's kernel; outputs and
  /// extras after it. kCopy: into a new tensor in the same memory (the CPU, pin_memory=True),
  /// unpacked without a copy; kHost / kHostPinned: into host memory (pin_memory False / True; the
  /// device copy is no longer held), copied back to the device when the backward node unpacks it.
  enum class Pack : uint8_t { kNone, kCopy, kHost, kHostPinned } pack = Pack::kNone;
  /// Which saved tensors the pack hook takes, and how (torchtune's OffloadActivations); without
  /// one, every tensor the hook sees, as save_on_cpu packs them.
  struct PackFilter {
    int64_t min_bytes = 0;         ///< smaller tensors stay as they are (min_offload_size)
    bool skip_parameters = false;  ///< a parameter or buffer itself stays (a view of one, Wᵀ, is taken)
    /// torch.empty_like: the copy has the source's strides, so a transposed source needs no
    /// contiguous or transpose-block temporary.
    bool keeps_strides = false;
    /// Called for each tensor the hook sees, in order: the saved storage and its packed copy
    /// (UINT32_MAX: left as it is).
    std::function<void(uint32_t saved, uint32_t packed)> on_pack;
  };
  const PackFilter* pack_filter = nullptr;
};

class TrainingSetup {
 public:
  virtual ~TrainingSetup() = default;
  /// model.to(device) is about to allocate parameter or buffer |t|: return true if the setup has
  /// made its storage itself (ZeRO-3 and FSDP keep only a shard; set StepState::storage[t]).
  virtual bool AllocateParameter(StepState&, TensorId) { return false; }
  /// The batch is about to allocate input |t|: return true if the setup has made it (FSDP2's
  /// MixedPrecisionPolicy: the batch stays in its own dtype, cast in the root's pre_forward).
  virtual bool AllocateInput(StepState&, TensorId) { return false; }
  /// After model.to(device) and the optimizer state that exists before the step, before the
  /// batch is allocated.
  virtual void OnSetup(StepState&) {}
  /// The batch is allocated (still the setup phase): the recording kit builds the batch before
  /// it wraps the model, so FSDP2's fully_shard runs here (Note [FSDP2]).
  virtual void OnSetupBatch(StepState&) {}
  /// With pp, after OnSetupBatch: torchtitan's pipeline_llm parallelizes the rank's model parts
  /// one after the other (parallelize_fn on each: TP, EP, then fully_shard): local stage |stage|'s
  /// part (PipelineStagePlan::local index; PipelineStagePlan::param_stage says whose a parameter is).
  virtual void OnParallelizeStage(StepState&, int) {}
  /// Around the forward of op |o| (phase kForward).
  virtual void BeforeForwardOp(StepState&, OpId, ForwardOpPolicy*) {}
  virtual void AfterForwardOp(StepState&, OpId) {}
  /// Around the backward node of op |o| (phase kBackward), in engine order.
  virtual void BeforeBackwardNode(StepState&, OpId) {}
  virtual void AfterBackwardNode(StepState&, OpId) {}
  /// The forward (and the loss) of a pass is over, before backward (an autocast region exits).
  virtual void AfterForwardPass(StepState&) {}
  /// A checkpoint's recomputation in backward (Note [Autocast] under checkpointing): it runs op
  /// |o| again, under the autocast state the forward had; a setup may set the storages the op
  /// reads (|policy|'s input_storage: the casts made again). Its node saves what it reads.
  virtual void BeforeRecomputeOp(StepState&, OpId, ForwardOpPolicy*) {}
  virtual void AfterRecomputeOp(StepState&, OpId) {}
  /// The recomputed function has returned: its autocast region exits (before fork_rng does).
  virtual void AfterRecompute(StepState&) {}
  /// Node |o| produced |grad| for its input |i|, before the engine hands it on; a setup may
  /// replace it (ToCopyBackward0 of an autocast cast) or take it (leaving it undefined).
  virtual void OnInputGrad(StepState&, OpId, size_t, Grad*) {}
  /// The backward pass is over: `del out, loss` and the autograd graph destroyed.
  virtual void AfterBackwardPass(StepState&) {}
  /// Nodes were destroyed outside the engine's run (a split backward's graph let go: DestroyNodes).
  virtual void AfterNodesDestroyed(StepState&) {}
  /// A torch.autograd.grad run (a pipeline stage's split backward, StepState::grad_pass) is over:
  /// the engine's queued callbacks run (FSDP2's root final callback).
  virtual void AfterGradPass(StepState&) {}
  /// A pipeline schedule's perform_reduce_grad of local stage |stage| (PipelineStagePlan::local
  /// index), after its last microbatch's backward: the data-parallel grad sync (FSDP2's
  /// post_backward with set_requires_gradient_sync(True), then its final callback).
  virtual void OnReduceGrad(StepState&, int) {}
  /// A multi-stage pipeline schedule's FSDP actions on local stage |stage|: UNSHARD (the stage's
  /// FSDP modules' unshard(async_op=True): kIssue), the wait before its next computation
  /// (_assert_unsharded: kWait), RESHARD (kReshard).
  enum class StageShard : uint8_t { kIssue, kWait, kReshard };
  virtual void OnStageShard(StepState&, int, StageShard) {}
  /// AccumulateGrad has finished parameter |k| (Graph::parameters index) for this pass.
  virtual void OnGradReady(StepState&, uint32_t) {}
  /// After backward (and `del out, loss`), before optimizer.step().
  virtual void BeforeOptimizerStep(StepState&) {}
  /// After optimizer.step(), before zero_grad().
  virtual void AfterOptimizerStep(StepState&) {}
  /// The parameters this rank's optimizer steps, in its order (ZeRO partitions them); called
  /// for the optimizer state before the step and for optimizer.step().
  virtual void OnOptimizerParams(const StepState&, std::vector<OptParam>*) {}
};

}  // namespace memsim

#endif  // MEMSIM_LIB_AUTODIFF_SETUP_H_
