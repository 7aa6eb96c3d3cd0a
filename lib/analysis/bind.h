// Binding: evaluates a graph's symbolic shapes for one configuration and runs shape inference
// op by op, giving every tensor its concrete TensorMeta and the tensor whose storage it uses.
// Pure function of (Graph, Bindings, options); the Graph is not modified.
#ifndef MEMSIM_LIB_ANALYSIS_BIND_H_
#define MEMSIM_LIB_ANALYSIS_BIND_H_

#include <optional>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/ops/profile.h"
#include "lib/ops/tensor_meta.h"
#include "lib/util/status.h"

namespace memsim {

struct BindOptions {
  const Profile* profile = nullptr;        ///< required
  std::optional<bool> inplace_override;    ///< --inplace-activations on|off; unset = keep
};

struct BoundGraph {
  Bindings bindings;               ///< the symbol values it was bound with
  std::vector<TensorMeta> metas;   ///< per tensor
  std::vector<TensorId> owner;     ///< per tensor: the tensor owning its storage (itself if fresh)
  std::vector<OpId> last_use;      ///< per tensor: last op consuming it in forward, or kNone
};

/// Binds |b| (every symbol must have a value) and infers all shapes. Errors name the file,
/// the op's JSON pointer and the problem.
Result<BoundGraph> BindGraph(const Graph& g, const Bindings& b, const BindOptions& opt);

}  // namespace memsim

#endif  // MEMSIM_LIB_ANALYSIS_BIND_H_
