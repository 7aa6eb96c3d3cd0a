// torch.compile on or off as a what-if (Note [Compiled regions] in docs/op-rules.md):
// `export_torch.py --compile` writes the eager op list of the same model beside its compiled
// regions (the `compiled` section's `eager_ops`); the reader keeps it as the graph's compile twin;
// `memsim run --compile off` runs the eager ops, `--compile on` the compiled regions, and `advise`
// proposes the other of the two with its simulated saving.
#ifndef MEMSIM_LIB_IR_COMPILE_MODE_H_
#define MEMSIM_LIB_IR_COMPILE_MODE_H_

#include "lib/ir/graph.h"
#include "lib/util/status.h"

namespace memsim {

/// Whether |g| runs torch.compile regions (ops "compiled").
bool HasCompiledRegions(const Graph& g);

/// |g| run compiled (|on|) or eager: |g| itself when it already runs so, else the twin the export
/// recorded, which keeps |g| as its own twin (so the other way stays one rewrite away). Errors
/// (one line, naming the fix): no twin (an eager export; a compiled export older than
/// `eager_ops`), or |g| already rewritten (LoRA, FP8, tensor parallel, a quantized base): the
/// twin is the model as exported.
Result<Graph> SelectCompile(Graph g, bool on);

}  // namespace memsim

#endif  // MEMSIM_LIB_IR_COMPILE_MODE_H_
