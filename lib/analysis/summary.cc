#include "lib/analysis/summary.h"

#include <algorithm>
#include <set>

#include "lib/ops/op_rules.h"

namespace memsim {

LayerTable SummarizeLayers(const Graph& g, const BoundGraph& bound, const Profile& profile,
                           const std::vector<bool>& frozen) {
  LayerTable t;
  std::vector<bool> rg = PropagateRequiresGrad(g, bound, frozen);
  std::vector<bool> param_seen(g.tensors.size(), false);
  std::vector<bool> is_param(g.tensors.size(), false);
  for (size_t k = 0; k < g.parameters.size(); ++k) {
    TensorId p = g.parameters[k];
    is_param[p] = true;
    int64_t n = bound.metas[p].numel();
    t.total_params += n;
    t.param_bytes += bound.metas[p].bytes();
    if (!(k < frozen.size() && frozen[k])) t.trainable_params += n;
  }
  for (TensorId b : g.buffers) t.param_bytes += bound.metas[b].bytes();
  std::set<std::pair<size_t, TensorId>> saved_storages;  // (row, storage owner or extra key)
  for (OpId o = 0; o < g.ops.size(); ++o) {
    const Op& op = g.ops[o];
    if (t.rows.empty() || t.rows.back().module != op.module) {
      LayerRow row;
      row.module = op.module;
      row.ops = std::string(OpKindName(op.kind));
      t.rows.push_back(std::move(row));
    } else {
      std::string k(OpKindName(op.kind));
      if (t.rows.back().ops.find(k) == std::string::npos) t.rows.back().ops += "+" + k;
    }
    LayerRow& row = t.rows.back();
    row.output_shape = bound.metas[op.outputs[0]].ShapeString();
    for (TensorId in : op.inputs)
      if (is_param[in] && !param_seen[in]) {
        param_seen[in] = true;
        row.params += bound.metas[in].numel();
      }
    for (TensorId out : op.outputs)
      if (bound.owner[out] == out) row.activation_bytes += bound.metas[out].bytes();
    const OpRule& rule = RuleFor(op.kind);
    RuleCtx c = MakeRuleCtx(g, bound, profile, o, &rg);
    if (!rule.forward || !c.rg.any()) continue;
    FwdPlan plan;
    rule.forward(c, &plan);
    std::set<int> saved_extras;  // a composite's inner nodes may each save the same extra
    for (const SavedRef& s : plan.saved) {
      if (s.kind == SavedRef::kExtra) {
        if (saved_extras.insert(s.index).second) row.saved_bytes += plan.extras[s.index].bytes;
        continue;
      }
      TensorId tid = s.kind == SavedRef::kInput ? op.inputs[s.index] : op.outputs[s.index];
      if (is_param[tid] || g.tensors[tid].role == TensorRole::kBuffer) continue;  // not activation memory
      TensorId owner = bound.owner[tid];
      if (saved_storages.insert({t.rows.size() - 1, owner}).second) row.saved_bytes += bound.metas[owner].bytes();
    }
  }
  for (const LayerRow& r : t.rows) {
    t.total_activation_bytes += r.activation_bytes;
    t.total_saved_bytes += r.saved_bytes;
  }
  return t;
}

}  // namespace memsim
