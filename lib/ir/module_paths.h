// Module paths: every module a graph's ops run in, with its ancestors ("layer1.0.conv1" gives
// "layer1", "layer1.0", "layer1.0.conv1"). What --checkpoint, --wrap and advise's repeated
// blocks match against.
#ifndef MEMSIM_LIB_IR_MODULE_PATHS_H_
#define MEMSIM_LIB_IR_MODULE_PATHS_H_

#include <set>
#include <string>

#include "lib/ir/graph.h"

namespace memsim {

/// The module paths of |g|'s ops and all their ancestors, sorted; "" for ops outside a module.
std::set<std::string> ModulePaths(const Graph& g);

}  // namespace memsim

#endif  // MEMSIM_LIB_IR_MODULE_PATHS_H_
