#include "lib/ops/bind.h"

#include "lib/ops/op_rules.h"
#include "lib/util/check.h"
#include "lib/util/checked.h"

namespace memsim {

namespace {

/// The first op of the trailing run of ops the graph's outputs do not depend on (the loss
/// computed from the model's outputs), or kNone if there is none. A graph that names no
/// outputs: the op producing the loss.
OpId LossStart(const Graph& g) {
  if (g.outputs.empty()) return g.loss == kNone ? kNone : g.tensors[g.loss].producer;
  std::vector<bool> needed(g.tensors.size(), false), model(g.ops.size(), false);
  for (TensorId t : g.outputs) needed[t] = true;
  for (OpId o = static_cast<OpId>(g.ops.size()); o-- > 0;) {
    const Op& op = g.ops[o];
    for (TensorId t : op.outputs) model[o] = model[o] || needed[t];
    if (model[o])
      for (TensorId t : op.inputs) needed[t] = true;
  }
  OpId start = static_cast<OpId>(g.ops.size());
  while (start > 0 && !model[start - 1]) --start;
  return start == g.ops.size() ? kNone : start;
}

/// Why a tensor's size is refused: its bytes overflow 64 bits (nullopt) or pass kMaxTensorBytes.
std::string TooLarge(const std::optional<TensorMeta>& m) {
  if (!m) return "too large (its byte size overflows 64 bits)";
  return "too large (" + std::to_string(m->bytes()) + " bytes; memsim models tensors up to 2^50 bytes = 1 PiB)";
}

}  // namespace

Result<BoundGraph> BindGraph(const Graph& g, const Bindings& b, const BindOptions& opt) {
  MEMSIM_CHECK(opt.profile != nullptr);
  BoundGraph out;
  out.bindings = b;
  out.inplace_override = opt.inplace_override;
  out.metas.resize(g.tensors.size());
  out.owner.resize(g.tensors.size());
  out.last_use.assign(g.tensors.size(), kNone);
  out.autocast = opt.autocast;
  if (opt.autocast) out.casts.resize(g.ops.size());
  if (opt.autocast && opt.autocast_loss_outside) out.autocast_exit = LossStart(g);
  for (uint32_t s = 0; s < g.symbols.size(); ++s)
    if (s >= b.size() || !b[s])
      return Status::InvalidArgument(g.source + ": symbol \"" + g.symbols[s] +
                                     "\" has no value (give it with --set " + g.symbols[s] +
                                     "=N or in the file's \"symbols\")");
  for (TensorId t = 0; t < g.tensors.size(); ++t) {
    const Tensor& tensor = g.tensors[t];
    out.owner[t] = t;
    if (tensor.role == TensorRole::kActivation) continue;
    std::vector<int64_t> sizes;
    for (const DimExpr& d : tensor.shape) {
      auto v = d.Eval(b);
      if (!v || *v < 0)
        return Status::InvalidArgument(g.source + ": " + tensor.pointer + ": shape of \"" + tensor.name +
                                       "\" is negative or overflows after binding symbols");
      sizes.push_back(*v);
    }
    Dtype dt = opt.model_dtype && tensor.dtype == Dtype::kFloat32 ? *opt.model_dtype : tensor.dtype;
    auto m = TensorMeta::Contiguous(dt, sizes);
    if (!m || m->bytes() > kMaxTensorBytes)
      return Status::InvalidArgument(g.source + ": " + tensor.pointer + ": \"" + tensor.name + "\" is " +
                                     TooLarge(m));
    out.metas[t] = std::move(*m);
  }
  for (OpId o = 0; o < g.ops.size(); ++o) {
    const Op& op = g.ops[o];
    const OpRule& rule = RuleFor(op.kind);
    RuleCtx ctx{op, b, *opt.profile, {}, {}, {}, out.inplace_override};
    if (static_cast<int>(op.inputs.size()) < rule.min_inputs ||
        static_cast<int>(op.inputs.size()) > rule.max_inputs)
      return Status::InvalidArgument(g.source + ": " + op.pointer + "/inputs: " +
                                     std::string(OpKindName(op.kind)) + " takes " +
                                     std::to_string(rule.min_inputs) + (rule.min_inputs == rule.max_inputs ? "" : " to " + std::to_string(rule.max_inputs)) +
                                     " inputs, got " + std::to_string(op.inputs.size()));
    for (TensorId in : op.inputs) {
      ctx.in.push_back(&out.metas[in]);
      out.last_use[in] = o;
    }
    for (TensorId t : op.keep_alive) out.last_use[t] = o;
    if (opt.autocast && o < out.autocast_exit) {
      ctx.autocast = true;
      out.casts[o] = AutocastCasts(opt.profile->autocast_table, op.kind, *opt.autocast, ctx.in);
      for (const InputCast& cast : out.casts[o]) ctx.in[cast.input] = &cast.meta;
    }
    InferOut inferred;
    Status st = rule.infer(ctx, &inferred);
    if (!st.ok()) return st.WithPrefix(g.source);
    if (inferred.metas.size() != op.outputs.size())
      return Status::InvalidArgument(g.source + ": " + op.pointer + "/outputs: " +
                                     std::string(OpKindName(op.kind)) + " produces " +
                                     std::to_string(inferred.metas.size()) + " output(s), the op lists " +
                                     std::to_string(op.outputs.size()));
    for (size_t j = 0; j < op.outputs.size(); ++j) {
      TensorId t = op.outputs[j];
      auto m = TensorMeta::Contiguous(inferred.metas[j].dtype, inferred.metas[j].sizes);
      if (inferred.overflow == static_cast<int>(j)) m.reset();
      if (!m || m->bytes() > kMaxTensorBytes)
        return Status::InvalidArgument(g.source + ": " + op.pointer + ": output \"" + g.tensors[t].name + "\" is " +
                                       TooLarge(m));
      out.metas[t] = std::move(inferred.metas[j]);
      int a = inferred.alias_of[j];
      out.owner[t] = a < 0 ? t : out.owner[op.inputs[a]];
    }
  }
  // loss.backward() creates its seed gradient implicitly only for one element ("grad can be
  // implicitly created only for scalar outputs").
  if (g.loss != kNone && out.metas[g.loss].numel() != 1)
    return Status::InvalidArgument(g.source + ": /loss: the loss \"" + g.tensors[g.loss].name + "\" has " +
                                   std::to_string(out.metas[g.loss].numel()) +
                                   " elements; loss.backward() needs a single element (reduce it with "
                                   "mean or sum)");
  return out;
}

std::vector<bool> PropagateRequiresGrad(const Graph& g, const BoundGraph& bound,
                                        const std::vector<bool>& frozen) {
  std::vector<bool> rg(g.tensors.size(), false);
  for (size_t k = 0; k < g.parameters.size(); ++k) {
    TensorId t = g.parameters[k];
    rg[t] = g.tensors[t].requires_grad && !(k < frozen.size() && frozen[k]);
  }
  for (const Op& op : g.ops) {
    const OpRule& rule = RuleFor(op.kind);
    bool any = false;
    for (size_t i = 0; i < op.inputs.size(); ++i)
      any |= Differentiable(rule, i) && rg[op.inputs[i]];
    for (TensorId t : op.outputs) rg[t] = any && IsFloating(bound.metas[t].dtype);
  }
  return rg;
}

RuleCtx MakeRuleCtx(const Graph& g, const BoundGraph& bound, const Profile& profile, OpId o,
                    const std::vector<bool>* rg) {
  const Op& op = g.ops[o];
  RuleCtx c{op, bound.bindings, profile, {}, {}, {}, bound.inplace_override};
  const OpRule& rule = RuleFor(op.kind);
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    c.in.push_back(&bound.metas[op.inputs[i]]);
    if (rg && (*rg)[op.inputs[i]] && Differentiable(rule, i)) c.rg.set(i);
  }
  c.autocast = bound.autocast.has_value() && o < bound.autocast_exit;
  if (o < bound.casts.size())
    for (const InputCast& cast : bound.casts[o]) c.in[cast.input] = &cast.meta;
  for (TensorId t : op.outputs) c.out.push_back(&bound.metas[t]);
  return c;
}

}  // namespace memsim
