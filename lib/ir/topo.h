// Topological order of a graph's ops and cycle detection (Boost.Graph). The only place Boost
// graph types appear.
#ifndef MEMSIM_LIB_IR_TOPO_H_
#define MEMSIM_LIB_IR_TOPO_H_

#include <vector>

#include "lib/ir/graph.h"
#include "lib/util/status.h"

namespace memsim {

/// Returns |g|'s ops in an execution order: the listed order when it is already topological
/// (it is the order Python ran them, which decides memory), else a Boost.Graph topological
/// order. A cycle is an error naming one op on it.
Result<std::vector<OpId>> TopologicalOrder(const Graph& g);

}  // namespace memsim

#endif  // MEMSIM_LIB_IR_TOPO_H_
