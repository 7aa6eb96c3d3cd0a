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

/// One parameter's shard (FSDPParam._init_sharded_param): dim 0 chunked over |world| as
/// torch.chunk does, every rank's padded to chunk 0's rows (new_zeros(chunks[0].size())).
struct Fsdp2Shard {
  int64_t rows = 1;          ///< dim 0 of the parameter (1 for a 0-d one)
  int64_t row_numel = 1;     ///< elements per row (the other dims)
  int64_t padded_rows = 1;   ///< ceil(rows / world): chunk 0's rows, every rank's padded shard
  int64_t local_rows = 1;    ///< this rank's unpadded rows (0 past the last chunk)
  int64_t padded_numel() const { return padded_rows * row_numel; }  ///< the all-gather input
  int64_t local_numel() const { return local_rows * row_numel; }    ///< the sharded DTensor's local tensor
};

/// The shard of a parameter of |sizes| on |rank| of |world|.
Fsdp2Shard ShardDim0(const std::vector<int64_t>& sizes, int world, int rank);

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
};

/// The groups of |g| in fully_shard order: one per module of |wrapped| holding parameters
/// (each parameter in the innermost one), then the root with the rest. The root is always
/// last, with no parameters when the wrapped modules hold them all. The model's forward ends
/// with the op producing its last output (the loss is outside it). A pipeline stage's module
/// (Note [FSDP2], with pp) is the ops [begin, end) and the parameters they read: its groups,
/// then its own root.
std::vector<Fsdp2Group> MakeFsdp2Groups(const Graph& g, const BoundGraph& b, const std::vector<std::string>& wrapped,
                                        int world, int rank, OpId begin = 0, OpId end = kNone);

}  // namespace memsim

#endif  // MEMSIM_LIB_AUTODIFF_SETUPS_FSDP2_H_
