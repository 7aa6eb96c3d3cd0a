// The training setups a configuration asks for, as data (SetupOptions, resolved by the pipeline:
// sim/simulator.h's SimPlan) and the factory that makes a fresh set of setup objects for one
// simulated step, which the pipeline hands to the step in StepConfig::setups. Each setup is one
// file in this folder, plugged into the step's hook points (lib/autodiff/setup.h); a new one is
// a file here and a line in MakeSetups, with no change to the step engine.
#ifndef MEMSIM_LIB_AUTODIFF_SETUPS_SETUPS_H_
#define MEMSIM_LIB_AUTODIFF_SETUPS_SETUPS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/autodiff/setup.h"
#include "lib/autodiff/setups/mesh.h"
#include "lib/autodiff/setups/pipeline.h"
#include "lib/autodiff/setups/sac.h"
#include "lib/ops/profile.h"
#include "lib/util/status.h"

namespace memsim {

/// Data parallelism over several ranks (Notes [DDP], [ZeRO] in docs/op-rules.md): the step of
/// one rank, |rank| of |world|.
struct ParallelOptions {
  int world = 1;                        ///< ranks; 1 = one device, no data parallelism
  int rank = 0;                         ///< the rank whose step is simulated
  bool ddp = false;                     ///< DistributedDataParallel wraps the model
  double bucket_cap_mb = 25;            ///< DDP bucket_cap_mb
  bool gradient_as_bucket_view = false; ///< DDP gradient_as_bucket_view
  int zero_stage = 0;                   ///< ZeRO 1|2|3 (0: off)
  std::string fsdp;                     ///< FSDP sharding strategy: "full" or "grad-op" ("": off)
  std::vector<std::string> wrap_modules;  ///< FSDP: the wrapped modules (module paths)
  std::string offload;                  ///< "optimizer" or "params" (ZeRO-Offload / FSDP CPU offload)
  /// FSDP MixedPrecision: "fp16" or "bf16" ("": off); the graph is bound in that dtype
  /// (SimOptions::dtype) while the shards keep the graph's own (Note [FSDP mixed precision]).
  std::string fsdp_mixed_precision;
  /// nn.DataParallel over |world| devices, one process; |rank| is the device simulated and the
  /// step is bound with that device's chunk of the batch (SimOptions' symbol "batch").
  bool data_parallel = false;
  int64_t dp_total_batch = 0;           ///< DataParallel: the whole batch (scattered over the devices)
  /// DeepSpeed's ZeRO knobs (Note [ZeRO]): reduce_bucket_size (elements of each ipg buffer),
  /// overlap_comm (stage 2: a second ipg buffer; unset = DeepSpeed's default, on for stage 3
  /// only), stage3_param_persistence_threshold (elements).
  int64_t zero_bucket_elements = 500'000'000;
  std::optional<bool> zero_overlap_comm;
  int64_t zero_persistence_threshold = 100'000;
  /// --mesh: the N-D device mesh of FSDP2 / TP / PP / CP / EP (Note [Device mesh]); all 1 = off.
  MeshDims mesh;
  /// FSDP2 (--mesh dp_shard=N; Note [FSDP2]): fully_shard(reshard_after_forward=...) and
  /// MixedPrecisionPolicy's param_dtype / reduce_dtype ("" = the parameters' own; the graph is
  /// bound in param_dtype while the shards keep the graph's dtype).
  bool fsdp2_reshard_after_forward = true;
  /// reshard_after_forward=N (an int, 1 < N < the shard world): after forward each rank keeps a
  /// 1/N slice of the gathered parameters, all-gathered over N ranks in backward; 0 = not used.
  int fsdp2_post_forward_world = 0;
  std::string fsdp2_param_dtype, fsdp2_reduce_dtype;
  /// Pipeline parallel (--mesh pp=N; Note [Pipeline parallel]): the schedule, the microbatches
  /// of one step (--batch is the whole batch) and the blocks per stage (empty: torchtitan's split).
  std::string pp_schedule = "1f1b";
  int pp_microbatches = 1;
  std::vector<int> pp_split;
  int pp_stages_per_rank = 1;       ///< stages per rank (above 1: a multi-stage schedule)
  /// --init meta (Note [Meta-device init]): the model is built on the meta device, parallelized,
  /// then materialized (to_empty, init_weights) as torchtitan does: only the rank's shards are
  /// ever allocated. false: built on the device whole, then sharded (the kit's flow).
  bool meta_init = false;
  bool enabled() const { return ddp || zero_stage > 0 || !fsdp.empty() || data_parallel || mesh.enabled(); }
};

/// torch.utils.checkpoint's implementation (Note [Activation checkpointing]).
enum class CheckpointImpl {
  kNonReentrant,  ///< use_reentrant=False: saved-tensor hooks, recomputation on the first unpack
  kReentrant,     ///< use_reentrant=True: CheckpointFunction, a nested backward through the recomputation
};

/// torchtune's OffloadActivations context around forward and loss (Note [Activation offloading]):
/// its constructor's arguments.
struct OffloadActivations {
  int64_t min_bytes = 1024;  ///< min_offload_size
  bool streams = true;       ///< use_streams (a side stream for the copies; CUDA only)
  bool pin_memory = true;    ///< use_pin_memory
  int max_fwd_stash = 5;     ///< max_fwd_stash_size
};

/// --offload-activations on | min_size=BYTES,streams=on|off,pin=on|off,stash=K (any of them; the
/// rest torchtune's defaults). Errors name the option and the accepted form.
Result<OffloadActivations> ParseOffloadActivations(const std::string& spec);  // offload_activations.cc

struct SetupOptions {
  /// torch.nn.utils.clip_grad_norm_(params, max_norm) before optimizer.step(); 0 = off.
  double clip_grad_norm = 0;
  /// torch.utils.checkpoint around the forward of each of these modules (dotted module paths;
  /// a module inside another one listed is part of the outer one), as |checkpoint_impl| does it.
  std::vector<std::string> checkpoint_modules;
  CheckpointImpl checkpoint_impl = CheckpointImpl::kNonReentrant;
  /// Selective checkpointing inside those regions (--sac; non-reentrant only); empty: off.
  SacPolicy sac;
  /// Data parallelism (DDP, ZeRO); world 1 = off.
  ParallelOptions parallel;
  /// torch.autocast around forward and loss (the dtypes are bound: BindOptions::autocast).
  bool autocast = false;
  /// torch.amp.GradScaler: scale(loss).backward(), step() (unscale_), update().
  bool grad_scaler = false;
  /// torch.autograd.graph.save_on_cpu around forward and loss: "on" (pin_memory=False), "pin"
  /// (pin_memory=True), "" = off (Note [Activation offloading]).
  std::string save_on_cpu;
  /// torchtune's activation offloading around forward and loss; nullopt = off.
  std::optional<OffloadActivations> offload_activations;
  /// One optimizer per parameter, stepped as soon as its grad is accumulated, the grad then set
  /// to None (torchtune optimizer_in_bwd; Note [Optimizer in backward]).
  bool optimizer_in_backward = false;
  /// Pipeline parallel: this rank's stage (the step engine runs its schedule); nullopt = off.
  std::optional<PipelineStagePlan> pipeline;
};

/// One object per enabled setup, in hook order.
std::vector<std::unique_ptr<TrainingSetup>> MakeSetups(const SetupOptions& options, const Profile& profile);

/// The element size of tensor |t| as the model holds it (a parameter or buffer, before any
/// setup's copy): under FSDP2's MixedPrecisionPolicy (|fsdp2_mp|) the graph is bound in
/// param_dtype while the model keeps the graph's own dtype (Note [FSDP2]); otherwise the bound
/// dtype (--dtype casts the model).
int64_t ModelElementSize(const StepState& s, TensorId t, bool fsdp2_mp);
/// Its bytes: the bound numel times ModelElementSize.
int64_t ModelBytes(const StepState& s, TensorId t, bool fsdp2_mp);
/// Whether parameter |t| belongs to local pipeline stage |stage| (PipelineStagePlan::param_stage);
/// -1: any (no pipeline, the whole model parallelized at once).
bool OfStage(const StepState& s, TensorId t, int stage);

// The setups (one file each).
std::unique_ptr<TrainingSetup> MakeClipGradNorm(const Profile& profile);           // clip_grad_norm.cc
std::unique_ptr<TrainingSetup> MakeCheckpoint(const std::vector<std::string>& modules, CheckpointImpl impl,
                                              const SacPolicy& sac);                  // checkpoint.cc
std::unique_ptr<TrainingSetup> MakeDdp(const ParallelOptions& options);                   // ddp.cc
std::unique_ptr<TrainingSetup> MakeZero(const ParallelOptions& options);                  // zero.cc
std::unique_ptr<TrainingSetup> MakeFsdp2(const ParallelOptions& options);                 // fsdp2.cc
std::unique_ptr<TrainingSetup> MakeZero3Params(const ParallelOptions& options);           // zero.cc
std::unique_ptr<TrainingSetup> MakeFsdp(const ParallelOptions& options);                  // fsdp.cc
std::unique_ptr<TrainingSetup> MakeDataParallel(const ParallelOptions& options);          // data_parallel.cc
std::unique_ptr<TrainingSetup> MakeTensorParallel(const ParallelOptions& options);        // tensor_parallel.cc
std::unique_ptr<TrainingSetup> MakeExpertParallel(const ParallelOptions& options);        // expert_parallel.cc
std::unique_ptr<TrainingSetup> MakeContextParallel(const ParallelOptions& options);       // context_parallel.cc
/// nn.DataParallel: device |device|'s chunk of |batch| (torch.chunk: ceil(batch / world) per
/// device, the last ones smaller or empty).
int64_t DataParallelChunk(int64_t batch, int world, int device);                          // data_parallel.cc
std::unique_ptr<TrainingSetup> MakeAutocast();                                     // autocast.cc
std::unique_ptr<TrainingSetup> MakeSaveOnCpu(bool pin_memory, const Profile& profile);  // save_on_cpu.cc
std::unique_ptr<TrainingSetup> MakeOffloadActivations(const OffloadActivations& options,
                                                      const Profile& profile);  // offload_activations.cc
std::unique_ptr<TrainingSetup> MakeGradScaler();                                   // grad_scaler.cc
std::unique_ptr<TrainingSetup> MakeOptimizerInBackward();                          // optimizer_in_backward.cc

}  // namespace memsim

#endif  // MEMSIM_LIB_AUTODIFF_SETUPS_SETUPS_H_
