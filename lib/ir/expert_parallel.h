// Expert parallelism as a graph rewrite: the per-rank graph that torchtitan's ExpertParallel
// (torchtitan/distributed/expert_parallel.py) leaves on each MoE layer's experts (Note [Expert
// parallel] in docs/parallel.md). The experts' [E, ...] weights keep E/N rows (Shard(0)); the
// routed rows pass through ep_dispatch (the counts' all-to-all, the rows' all-to-all and the
// permutation to local-expert order) into a split over the rank's E/N local experts, whose
// outputs ep_combine sends back. The rank's received rows are symbols bound per rank:
//   ep<L>_s<s>_e<j>  rows source rank s sends to local expert j of routing L
//   ep<L>_e<j>       rows local expert j receives (the split's sections)
//   ep<L>_recv       rows the rank receives (the all-to-all's output)
#ifndef MEMSIM_LIB_IR_EXPERT_PARALLEL_H_
#define MEMSIM_LIB_IR_EXPERT_PARALLEL_H_

#include <string>

#include "lib/ir/graph.h"
#include "lib/util/status.h"

namespace memsim {

/// The symbol names above.
std::string EpRowsSymbol(size_t routing, int source, int64_t local_expert);
std::string EpExpertSymbol(size_t routing, int64_t local_expert);
std::string EpReceivedSymbol(size_t routing);

/// |g| as one of |degree| expert-parallel ranks runs it. Errors (one line naming the graph or
/// the op and the fix): a graph without MoE routing; experts not divisible by the degree; a
/// routed split without the bincount of its counts.
Result<Graph> ApplyExpertParallel(const Graph& g, int degree);

}  // namespace memsim

#endif  // MEMSIM_LIB_IR_EXPERT_PARALLEL_H_
