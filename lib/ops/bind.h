// Binding: evaluates a graph's symbolic shapes for one configuration and runs shape inference
// op by op, giving every tensor its concrete TensorMeta and the tensor whose storage it uses;
// then which tensors require grad. It runs before autodiff (lib/autodiff) and everything after
// reads the BoundGraph. Pure functions of their arguments; the Graph is not modified.
#ifndef MEMSIM_LIB_OPS_BIND_H_
#define MEMSIM_LIB_OPS_BIND_H_

#include <optional>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/ops/autocast_lists.h"
#include "lib/ops/op_rules.h"
#include "lib/ops/profile.h"
#include "lib/ops/tensor_meta.h"
#include "lib/util/status.h"

namespace memsim {

struct BindOptions {
  const Profile* profile = nullptr;        ///< required
  std::optional<bool> inplace_override;    ///< --inplace-activations on|off; unset = keep
  /// torch.autocast around the forward (and the loss): the lower-precision dtype (kFloat16 or
  /// kBFloat16); unset = off. Each op's inputs get the casts of Profile::autocast_table.
  std::optional<Dtype> autocast;
  /// --amp-loss outside: `with autocast(): out = model(x)`, then the loss after the region: the
  /// loss's ops (those the graph's outputs do not depend on, from the first of them on) run
  /// without casts, on the model's lower-precision outputs (Note [Autocast]).
  bool autocast_loss_outside = false;
  /// model.half() / .bfloat16() (--dtype): fp32 parameters, buffers and floating inputs are
  /// bound in this dtype instead, so activations, grads and optimizer state follow it.
  std::optional<Dtype> model_dtype;
};

struct BoundGraph {
  Bindings bindings;               ///< the symbol values it was bound with
  std::optional<bool> inplace_override;  ///< the BindOptions' --inplace-activations, for every rule
  std::vector<TensorMeta> metas;   ///< per tensor
  std::vector<TensorId> owner;     ///< per tensor: the tensor owning its storage (itself if fresh)
  std::vector<OpId> last_use;      ///< per tensor: last op consuming it in forward, or kNone
  std::optional<Dtype> autocast;   ///< the BindOptions' autocast dtype
  /// Per op (empty without autocast): the casts autocast makes of its inputs, in the order it
  /// makes them; the op's rule sees the cast metas (Note [Autocast] in docs/op-rules.md).
  std::vector<std::vector<InputCast>> casts;
  /// With BindOptions::autocast_loss_outside: the first op after the autocast region (the
  /// loss's first op); kNone = the region covers every op.
  OpId autocast_exit = kNone;
};

/// Binds |b| (every symbol must have a value) and infers all shapes. Errors name the file,
/// the op's JSON pointer and the problem.
Result<BoundGraph> BindGraph(const Graph& g, const Bindings& b, const BindOptions& opt);

/// Requires-grad of every tensor: parameters unless frozen; activations whose op has an
/// autograd node (some differentiable input requires grad).
std::vector<bool> PropagateRequiresGrad(const Graph& g, const BoundGraph& bound,
                                        const std::vector<bool>& frozen);

/// What op |o|'s rule sees: its input (and, when bound, output) metas, the bound in-place
/// override, and (with |rg|) which differentiable inputs require grad.
RuleCtx MakeRuleCtx(const Graph& g, const BoundGraph& bound, const Profile& profile, OpId o,
                    const std::vector<bool>* rg = nullptr);

}  // namespace memsim

#endif  // MEMSIM_LIB_OPS_BIND_H_
