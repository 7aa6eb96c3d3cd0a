// PyTorch FullyShardedDataParallel (Note [FSDP] in docs/op-rules.md): one FlatParameter per
// wrapped module (--wrap; the root holds the parameters no wrapped module does), padded to a
// multiple of the world size and sharded; unsharded (all-gathered) before the unit's forward and
// resharded after it (FULL_SHARD; SHARD_GRAD_OP keeps it to the backward; the root always
// does), unsharded again in backward with BACKWARD_PRE prefetch of the next unit, its grads
// reduce-scattered into a sharded flat grad; the optimizer steps the shards. With
// --offload params (CPUOffload(offload_params=True)) the shards, their grads and the optimizer
// live in host memory. With --fsdp-mixed-precision fp16|bf16 (MixedPrecision(param_dtype,
// reduce_dtype, buffer_dtype) all that dtype) the shards, sharded grads and optimizer stay fp32
// and the gathered units, their grads and the reduce-scatter are low precision (Note [FSDP
// mixed precision]).
#include "lib/autodiff/setups/setups.h"
#include "lib/autodiff/setups/sharded.h"

namespace memsim {

std::unique_ptr<TrainingSetup> MakeFsdp(const ParallelOptions& o) {
  ShardPolicy p;
  p.label = "FSDP";
  p.world = o.world;
  p.flat = true;
  p.reshard_after_forward = o.fsdp == "full";
  p.prefetch_backward = true;  // backward_prefetch=BACKWARD_PRE (the default)
  p.reduce_scatter_grads = true;
  p.offload_params = o.offload == "params";
  p.mixed_precision = !o.fsdp_mixed_precision.empty();
  return MakeShardedParams(p, o.wrap_modules);
}

}  // namespace memsim
