#include "lib/autodiff/setups/setups.h"

#include "lib/autodiff/state.h"

namespace memsim {

std::vector<std::unique_ptr<TrainingSetup>> MakeSetups(const SetupOptions& options, const Profile& profile) {
  std::vector<std::unique_ptr<TrainingSetup>> setups;
  if (options.autocast) setups.push_back(MakeAutocast());
  if (!options.save_on_cpu.empty()) setups.push_back(MakeSaveOnCpu(options.save_on_cpu == "pin", profile));
  if (options.offload_activations) setups.push_back(MakeOffloadActivations(*options.offload_activations, profile));
  if (!options.checkpoint_modules.empty()) setups.push_back(MakeCheckpoint(options.checkpoint_modules, options.checkpoint_impl, options.sac));
  if (options.parallel.ddp) setups.push_back(MakeDdp(options.parallel));
  if (options.parallel.zero_stage > 0) setups.push_back(MakeZero(options.parallel));
  if (options.parallel.zero_stage == 3) setups.push_back(MakeZero3Params(options.parallel));
  if (!options.parallel.fsdp.empty()) setups.push_back(MakeFsdp(options.parallel));
  // The stage module first: its parameters, batch and optimizer are what the others see.
  if (options.pipeline) setups.push_back(MakePipelineStage(*options.pipeline));
  // torchtitan's order on the 2-D mesh: parallelize_module, then fully_shard (Note [FSDP2]).
  if (options.parallel.mesh.tp > 1) setups.push_back(MakeTensorParallel(options.parallel));
  // torchtitan's parallelize: expert parallel (apply_moe_ep_tp) before fully_shard.
  if (options.parallel.mesh.ep > 1) setups.push_back(MakeExpertParallel(options.parallel));
  if (options.parallel.mesh.dp_shard > 1) setups.push_back(MakeFsdp2(options.parallel));
  if (options.parallel.mesh.cp > 1) setups.push_back(MakeContextParallel(options.parallel));
  if (options.parallel.data_parallel) setups.push_back(MakeDataParallel(options.parallel));
  // The scaler's unscale_ comes before clipping (scaler.unscale_(opt); clip_grad_norm_(...)).
  if (options.grad_scaler) setups.push_back(MakeGradScaler());
  if (options.clip_grad_norm > 0) setups.push_back(MakeClipGradNorm(profile));
  if (options.optimizer_in_backward) setups.push_back(MakeOptimizerInBackward());
  return setups;
}

int64_t ModelElementSize(const StepState& s, TensorId t, bool fsdp2_mp) {
  return ElementSize(fsdp2_mp ? s.g.tensors[t].dtype : s.bound.metas[t].dtype);
}

bool OfStage(const StepState& s, TensorId t, int stage) {
  return stage < 0 || s.cfg.pipeline->param_stage[s.param_index[t]] == stage;
}

int64_t ModelBytes(const StepState& s, TensorId t, bool fsdp2_mp) {
  return s.bound.metas[t].numel() * ModelElementSize(s, t, fsdp2_mp);
}

}  // namespace memsim
