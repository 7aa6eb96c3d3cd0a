// Sharded parameters, gathered per unit just in time: the engine shared by ZeRO-3 (one unit per
// module owning parameters, each parameter partitioned on its own) and FSDP (one FlatParameter
// per wrapped module). Notes [ZeRO] and [FSDP] in docs/op-rules.md.
#ifndef MEMSIM_LIB_AUTODIFF_SETUPS_SHARDED_H_
#define MEMSIM_LIB_AUTODIFF_SETUPS_SHARDED_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/autodiff/setup.h"
#include "lib/ops/bind.h"

namespace memsim {

/// One unit of sharded parameters.
struct ShardUnit {
  std::string module;             ///< its module path ("" = the root: the whole model)
  std::vector<uint32_t> params;   ///< Graph::parameters indices, registration order
  int64_t full_bytes = 0;         ///< the all-gathered (unsharded) bytes, padding included
  int64_t shard_bytes = 0;        ///< what one rank keeps
  /// The shard in the gathered dtype (FSDP MixedPrecision: the low-precision shard cast before
  /// the all-gather and the reduce-scatter's output); = shard_bytes without mixed precision.
  int64_t low_shard_bytes = 0;
  OpId first = kNone, last = kNone;  ///< the forward ops inside the module
};

/// How units are formed and when they are gathered and freed.
struct ShardPolicy {
  std::string label;                  ///< "ZeRO-3" or "FSDP" (buffer names)
  int world = 1;
  bool flat = false;                  ///< FSDP: a unit is one FlatParameter padded to a multiple of world
  bool reshard_after_forward = true;  ///< free after the unit's forward (ZeRO-3, FULL_SHARD)
  bool prefetch_forward = false;      ///< after the first step: gather the next unit with this one in forward
  bool prefetch_backward = false;     ///< gather the next unit (in backward order) with this one
  int64_t persistence_threshold = 0;  ///< ZeRO-3: parameters of at most this many elements stay whole
  bool reduce_scatter_grads = false;  ///< FSDP: a unit's grads become one sharded flat grad
  bool offload_params = false;        ///< the shards (FSDP: and their grads and optimizer) in host memory
  /// FSDP MixedPrecision(param_dtype = reduce_dtype = the bound dtype): the shards, sharded
  /// grads and optimizer keep the graph's own dtype (fp32); the gathered unit, its grad and the
  /// reduce-scatter are in the bound (low) dtype (Note [FSDP mixed precision]).
  bool mixed_precision = false;
};

/// The units of |g|: ZeRO-3 (|wrapped| empty, not flat): one per module owning non-persistent
/// parameters; FSDP (flat): one per module of |wrapped| (each parameter in the innermost one
/// holding it), then the root with the rest.
std::vector<ShardUnit> MakeShardUnits(const Graph& g, const BoundGraph& b, const ShardPolicy& p,
                                      const std::vector<std::string>& wrapped);

/// |module| is |root| or inside it ("" = the root module: everything is).
bool WithinModule(const std::string& module, const std::string& root);
/// The module owning parameter |param_name| ("layers.0.attn.w" → "layers.0.attn"; "" at the root).
std::string OwnerModule(const std::string& param_name);

std::unique_ptr<TrainingSetup> MakeShardedParams(const ShardPolicy& policy, std::vector<std::string> wrapped);

}  // namespace memsim

#endif  // MEMSIM_LIB_AUTODIFF_SETUPS_SHARDED_H_
