// torch.compile's activation_memory_budget as a what-if without re-exporting (Note [Compiled
// regions] in docs/op-rules.md): `export_torch.py --compile --memory-budget 1,0.5,0` records one
// partitioner program per budget in each compiled op (the first as its attributes, the others
// under `mb<F>:<attribute>` keys, listed by `memory_budgets`); `memsim run --memory-budget F`
// makes the recorded program of F the one that runs.
#ifndef MEMSIM_LIB_IR_COMPILED_BUDGET_H_
#define MEMSIM_LIB_IR_COMPILED_BUDGET_H_

#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/util/status.h"

namespace memsim {

/// The budgets the compiled op |op| records, as the exporter wrote them ("1", "0.5", "0"); the
/// first is the program of its plain attributes.
std::vector<std::string> RecordedMemoryBudgets(const Op& op);

/// |g| with every compiled region running the program recorded for budget |budget| (`--memory-budget`
/// text, e.g. "0.5"). Errors (one line, naming the fix): no compiled region in |g|, a budget outside
/// [0, 1], or a budget a region did not record (the export command that records it).
Result<Graph> SelectMemoryBudget(Graph g, const std::string& budget);

}  // namespace memsim

#endif  // MEMSIM_LIB_IR_COMPILED_BUDGET_H_
