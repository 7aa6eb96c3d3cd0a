#include "lib/ir/compile_mode.h"

#include <algorithm>
#include <memory>
#include <utility>

namespace memsim {

bool HasCompiledRegions(const Graph& g) {
  return std::any_of(g.ops.begin(), g.ops.end(), [](const Op& op) { return op.kind == OpKind::kCompiled; });
}

Result<Graph> SelectCompile(Graph g, bool on) {
  const std::string flag = on ? "--compile on" : "--compile off";
  if (HasCompiledRegions(g) == on) return g;
  if (!g.compile_twin)
    return Status::InvalidArgument(
        flag + ": " + g.source +
        (on ? " has no compiled regions: export the model with `tools/export_torch.py MODEL --compile` (it keeps "
              "the eager ops beside them)"
            : " records no eager op list beside its compiled regions: re-export it with `tools/export_torch.py "
              "MODEL --compile`"));
  if (g.lora || g.quantized_base || !g.fp8.empty() || g.tp_degree > 1)
    return Status::InvalidArgument(flag + ": " + g.source +
                                   " was rewritten (LoRA, FP8, tensor parallel or a quantized base) after it was "
                                   "read: give --compile alone, the twin is the model as exported");
  Graph other = *g.compile_twin;
  g.compile_twin = nullptr;
  other.compile_twin = std::make_shared<const Graph>(std::move(g));
  return other;
}

}  // namespace memsim
