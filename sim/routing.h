// Mixture-of-experts routing bindings (Notes [Routed token counts] in docs/op-rules.md and
// [Expert parallel] in docs/parallel.md): how many tokens each expert receives, from --set
// routed<L>_e<i>=N, else --moe-routing (balanced, hot=F, or every rank's counts), bound into a
// graph's routed<L>_e<i> symbols and, under expert parallelism, into the rank's received-row
// symbols (lib/ir/expert_parallel.h) summed over every source rank.
#ifndef MEMSIM_SIM_ROUTING_H_
#define MEMSIM_SIM_ROUTING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/util/status.h"

namespace memsim {

struct SimOptions;

/// |n| routed elements over |experts| by a --moe-routing policy: balanced (n / E each, the first
/// n % E one more), or hot=F (expert 0 takes F times the mean, at most n; the rest balanced).
Result<std::vector<int64_t>> RoutedCounts(const std::string& policy, int64_t n, int64_t experts);

/// --moe-routing ranks=C0:C1:... : each rank's tokens per expert, C as the recording kit's
/// CONFIG writes routed= (layers separated by '/', experts by ','): [rank][layer][expert].
/// Empty when |policy| is not of that form. Errors name the option and the form.
Result<std::vector<std::vector<std::vector<int64_t>>>> ParseRankCounts(const std::string& policy);

/// The rows rank |rank| of |world| receives for each of its E/world local experts from each
/// source rank, given each source's counts over the E experts: [source][local expert].
std::vector<std::vector<int64_t>> ReceivedRows(const std::vector<std::vector<int64_t>>& sources, int world, int rank);

/// Binds every routing's counts that --set left unset (all of them under expert parallelism,
/// per rank: opt.parallel.rank). Errors: a bad policy, counts not adding up to the routed rows.
Status BindRouting(const Graph& g, const SimOptions& opt, Bindings* b);

}  // namespace memsim

#endif  // MEMSIM_SIM_ROUTING_H_
