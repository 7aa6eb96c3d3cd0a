// Module paths: every module a graph's ops run in, with its ancestors ("layer1.0.conv1" gives
// "layer1", "layer1.0", "layer1.0.conv1"). What --checkpoint, --wrap and advise's repeated
// blocks match against, and the @blocks selectors of --checkpoint and --wrap.
#ifndef MEMSIM_LIB_IR_MODULE_PATHS_H_
#define MEMSIM_LIB_IR_MODULE_PATHS_H_

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lib/ir/graph.h"

namespace memsim {

/// The module paths of |g|'s ops and all their ancestors, sorted; "" for ops outside a module.
std::set<std::string> ModulePaths(const Graph& g);

/// The repeated blocks of |g| (module paths ending in an index whose parent has several, the
/// outermost such level): what checkpointing and FSDP usually wrap. In order of their parent,
/// then of their index as a number ("h.2" before "h.10").
std::vector<std::string> RepeatedBlocks(const Graph& g);

/// The modules |selector| names: "@blocks" (RepeatedBlocks) or "@blocks%K=R" (the blocks whose
/// position i, from 0, has i % K == R: Hugging Face's every_n_layers=K is %K=0, torchtitan's
/// selective_ac_option = "K" is %K=K-1); nullopt when |selector| is neither.
std::optional<std::vector<std::string>> SelectBlocks(const Graph& g, const std::string& selector);

}  // namespace memsim

#endif  // MEMSIM_LIB_IR_MODULE_PATHS_H_
