// Several ranks (--ddp WORLD, --zero 1|2 --world N, --mesh): each rank's step is its own event stream
// through the same allocator model. Ranks whose streams are the same are simulated once and
// reported together: under DDP every rank holds the same buffers (rank 0 stands for all);
// under PyTorch's ZeroRedundancyOptimizer the greedy partition gives each rank different
// parameters, so every rank is simulated and identical ones are merged; DeepSpeed's flat
// partitions are the same size on every rank. Each run goes through RunPipeline.
#ifndef MEMSIM_SIM_RANKS_H_
#define MEMSIM_SIM_RANKS_H_

#include <vector>

#include "sim/pipeline.h"

namespace memsim {

/// One distinct rank: the ranks it stands for (ascending) and its run.
struct RankRun {
  std::vector<int> ranks;
  RunResult result;
};

/// Every distinct rank of |c| (c.sim.parallel; a single entry for rank 0 when it is off). The
/// first entry is rank 0's. Errors: those of RunPipeline.
Result<std::vector<RankRun>> RunRanks(const Graph& g, const RunConfig& c);

/// Whether the ranks of |c| can hold different buffers (ZeroRedundancyOptimizer's greedy
/// partitions; DataParallel's device 0 and the chunks): only then are ranks beyond 0 simulated.
bool RanksMayDiffer(const RunConfig& c);

/// Whether two event streams allocate and free the same bytes in the same order.
bool SameStream(const EventStream& a, const EventStream& b);

}  // namespace memsim

#endif  // MEMSIM_SIM_RANKS_H_
