// FSDP2 (torch.distributed.fsdp.fully_shard): the per-parameter dim-0 shard layout of one rank
// and its parameter groups (one per fully_shard call: each wrapped module, then the root).
// Note [FSDP2] in docs/parallel.md.
#ifndef MEMSIM_LIB_AUTODIFF_SETUPS_FSDP2_H_
#define MEMSIM_LIB_AUTODIFF_SETUPS_FSDP2_H_

#include <cstdint>
#include <string>
#include <vector>

#include "lib/ops/bind.h"

namespace memsim {

/// One parameter's shard (FSDPParam._init_sharded_param): its shard dim (0, or 1 under a
/// shard_placement_fn's Shard(1)) chunked over |world| as torch.chunk does, every rank's padded
/// to chunk 0's size (new_zeros(chunks[0].size())).
struct Fsdp2Shard {
  int dim = 0;               ///< the shard dim
  int64_t rows = 1;          ///< the parameter's size along it (1 for a 0-d one)
  int64_t row_numel = 1;     ///< elements per index of the shard dim (the other dims)
  int64_t padded_rows = 1;   ///< ceil(rows / world): chunk 0's rows, every rank's padded shard
  int64_t local_rows = 1;    ///< this rank's unpadded rows (0 past the last chunk)
  int64_t padded_numel() const { return padded_rows * row_numel; }  ///< the all-gather input
  int64_t local_numel() const { return local_rows * row_numel; }    ///< the sharded DTensor's local tensor
};

/// The shard of a parameter of |sizes| on |rank| of |world|, on dim 0 or |dim|.
Fsdp2Shard ShardDim0(const std::vector<int64_t>& sizes, int world, int rank);
Fsdp2Shard ShardDim(const std::vector<int64_t>& sizes, int dim, int world, int rank);

/// One FSDPParamGroup: the parameters one fully_shard call manages.
struct Fsdp2Group {
  std::string module;             ///< "" = the root
  std::vector<uint32_t> params;   ///< Graph::parameters indices, registration order
  std::vector<Fsdp2Shard> shards; ///< per entry of |params|
  int64_t shard_numel = 0;        ///< sum of padded shard numels: all-gather input, reduce-scatter output
  /// The forward ops of the module (its subtree; the root: the model's ops no group holds).
  std::vector<OpId> ops;
  OpId first = kNone, last = kNone;  ///< first and last of the module's forward (the root: the model's)
  bool root = false;              ///< the fully_shard(root) call (a pipeline stage's module)
  int stage = 0;                  ///< the pipeline stage (PipelineStagePlan::local index) it belongs to
  int world = 1;                  ///< its shard group's ranks
  /// The fully_shard call it belongs to: a call's parameters on two meshes make two groups
  /// (FSDPState._fsdp_param_groups, in the order of their first parameter), which share its ops.
  int call = 0;
};

/// Expert parallelism borrowing dp_shard (torchtitan's apply_fsdp_to_decoder, Note [Expert
/// parallel]): the EP-local expert weights are sharded over the efsdp ranks, on dim 1 when
/// dp_shard·cp exceeds the experts (Shard(1)), else dim 0; the other parameters over the dense mesh.
struct Fsdp2Experts {
  std::vector<TensorId> params;  ///< the EP-sharded weights (Graph::ep_shards)
  int world = 1, rank = 0;       ///< efsdp's ranks and this rank's index in it
  int dim = 0;                   ///< the shard dim
};

/// The groups of |g| in fully_shard order: one per module of |wrapped| holding parameters
/// (each parameter in the innermost one), then the root with the rest. The root is always
/// last, with no parameters when the wrapped modules hold them all. The model's forward ends
/// with the op producing its last output (the loss is outside it). A pipeline stage's module
/// (Note [FSDP2], with pp) is the ops [begin, end) and the parameters they read: its groups,
/// then its own root.
/// With |experts|, a call holding expert weights makes a second group of them, after its first.
std::vector<Fsdp2Group> MakeFsdp2Groups(const Graph& g, const BoundGraph& b, const std::vector<std::string>& wrapped,
                                        int world, int rank, OpId begin = 0, OpId end = kNone,
                                        const Fsdp2Experts* experts = nullptr);

/// Per group: whether its module lies inside another wrapped call's (under ep, each block's
/// experts wrapped apart before the block: torchtitan's flow before fully_shard took a mesh per
/// parameter, torch < 2.12; Note [Expert parallel]).
std::vector<bool> NestedGroups(const std::vector<Fsdp2Group>& groups);

/// The groups of the block call after (|next|) or before the call starting at group |u| on its
/// stage, then of the calls nested in it: a block's explicit prefetch list [block, its experts].
std::vector<size_t> NeighbourBlock(const std::vector<Fsdp2Group>& groups, const std::vector<bool>& nested, size_t u,
                                   bool next);

}  // namespace memsim

#endif  // MEMSIM_LIB_AUTODIFF_SETUPS_FSDP2_H_
