// The partition rules of ZeRO that unit tests check on their own (Note [ZeRO] in
// docs/op-rules.md).
#ifndef MEMSIM_LIB_AUTODIFF_SETUPS_ZERO_H_
#define MEMSIM_LIB_AUTODIFF_SETUPS_ZERO_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace memsim {

/// torch.distributed.optim.ZeroRedundancyOptimizer._partition_parameters: the parameters
/// sorted by element count, largest first (stable), each given to the rank with the fewest
/// elements so far (the lowest such rank). Returns each rank's parameter positions, in that
/// sorted order (the order its local optimizer sees them).
std::vector<std::vector<size_t>> GreedyPartition(const std::vector<int64_t>& numels, int world);

/// DeepSpeed's flat partition: the flattened group padded to a multiple of 2·world elements
/// (nccl_start_alignment_factor 2), split evenly. Returns the elements of each rank's partition.
int64_t FlatPartitionNumel(int64_t numel, int world);

}  // namespace memsim

#endif  // MEMSIM_LIB_AUTODIFF_SETUPS_ZERO_H_
