#include "lib/ir/tensor_parallel.h"

#include <map>
#include <set>

namespace memsim {
namespace {

std::string LastPart(const std::string& module) {
  const size_t dot = module.rfind('.');
  return dot == std::string::npos ? module : module.substr(dot + 1);
}

/// The ops that give a target shape: their attribute, and whether -1 in it infers a size.
const char* ShapeAttr(OpKind k) {
  switch (k) {
    case OpKind::kView:
    case OpKind::kReshape:
      return "shape";
    case OpKind::kExpand:
      return "sizes";
    default:
      return nullptr;
  }
}

/// The rewrite's state: the graph being built and which tensors hold a shard of the features.
struct Rewrite {
  const TensorParallelConfig& c;
  Graph out;
  std::vector<bool> sharded;
  std::set<TensorId> done;  // parameters already divided (tied weights)
  std::map<TensorId, std::pair<int64_t, std::string>> features;  // a Colwise output: per-rank features, module

  TensorId NewTensor(const std::string& name, const Op& at) {
    Tensor t;
    t.name = name;
    t.role = TensorRole::kActivation;
    t.pointer = at.pointer;
    out.tensors.push_back(std::move(t));
    sharded.push_back(false);
    return static_cast<TensorId>(out.tensors.size() - 1);
  }

  Status Divide(TensorId p, int dim, const Op& op) {
    if (done.count(p)) return Status::OK();
    Tensor& t = out.tensors[p];
    const std::string where = "--mesh tp=" + std::to_string(c.degree) + ": " + op.module + " (" + t.name + ")";
    if (static_cast<int>(t.shape.size()) <= dim || !t.shape[dim].is_const())
      return Status::InvalidArgument(where + " has no constant size on dim " + std::to_string(dim) +
                                     "; tensor parallelism shards the weight's features there");
    int64_t& n = t.shape[dim].coeff;
    if (n % c.degree != 0)
      return Status::InvalidArgument(where + ": size " + std::to_string(n) + " on dim " + std::to_string(dim) +
                                     " is not divisible by " + std::to_string(c.degree) +
                                     " (uneven DTensor shards are not simulated); choose a tp degree that divides it");
    n /= c.degree;
    done.insert(p);
    out.tp_shards.push_back({p, dim});
    return Status::OK();
  }

  /// A view's sizes in the sharded region: the head count (the first constant entry) divided,
  /// unless a -1 lets the view infer it.
  Status DivideShape(Op* op) {
    const char* attr = ShapeAttr(op->kind);
    if (attr == nullptr) return Status::OK();
    const auto* v = op->attrs.Find(attr);
    if (v == nullptr || !std::holds_alternative<std::vector<DimExpr>>(*v)) return Status::OK();
    std::vector<DimExpr> shape = std::get<std::vector<DimExpr>>(*v);
    bool infers = false;
    for (const DimExpr& d : shape) infers = infers || (d.is_const() && d.coeff == -1);
    if (infers) return WholeHeads(*op, shape);
    for (DimExpr& d : shape)
      if (d.is_const() && d.coeff > 1 && d.coeff % c.degree == 0) {
        d.coeff /= c.degree;
        op->attrs.Set(attr, shape);
        return Status::OK();
      }
    return Status::InvalidArgument("--mesh tp=" + std::to_string(c.degree) + ": " + std::string(OpKindName(op->kind)) + " " +
                                   op->name + " in " + op->module +
                                   " reshapes a sharded tensor but none of its sizes is a head count divisible by " +
                                   std::to_string(c.degree));
  }

  /// A view that infers the head count from a Colwise output: the rank's features must be whole heads.
  Status WholeHeads(const Op& op, const std::vector<DimExpr>& shape) {
    auto it = features.find(op.inputs[0]);
    if (it == features.end() || shape.empty() || !shape.back().is_const() || shape.back().coeff <= 0) return Status::OK();
    const int64_t head_dim = shape.back().coeff;
    if (it->second.first % head_dim == 0) return Status::OK();
    return Status::InvalidArgument("--mesh tp=" + std::to_string(c.degree) + ": " + it->second.second + " keeps " +
                                   std::to_string(it->second.first) + " features per rank, not whole heads of " +
                                   std::to_string(head_dim) + " (view " + op.name +
                                   "); the tp degree must divide the number of (key/value) heads");
  }

  Op Collective(OpKind kind, const Op& at, TensorId in, TensorId result, const std::string& name) {
    Op op;
    op.kind = kind;
    op.name = name;
    op.module = at.module;
    op.pointer = at.pointer;
    op.inputs = {in};
    op.outputs = {result};
    op.attrs.Set("world", DimExpr::Const(c.degree));
    return op;
  }

  Status Colwise(const Op& op) {
    MEMSIM_RETURN_IF_ERROR(Divide(op.inputs[1], 0, op));
    if (op.inputs.size() > 2) MEMSIM_RETURN_IF_ERROR(Divide(op.inputs[2], 0, op));
    Op lin = op;
    const TensorId in = NewTensor(op.name + ":tp_input", op);
    out.ops.push_back(Collective(OpKind::kGradAllReduce, op, op.inputs[0], in, op.name + ":tp_input"));
    lin.inputs[0] = in;
    for (TensorId t : lin.outputs) sharded[t] = true;
    features[op.outputs[0]] = {out.tensors[op.inputs[1]].shape[0].coeff, op.module};
    out.ops.push_back(std::move(lin));
    return Status::OK();
  }

  Status Rowwise(const Op& op) {
    if (op.inputs.size() > 2)
      return Status::InvalidArgument("--mesh tp=" + std::to_string(c.degree) + ": " + op.module +
                                     " has a bias; RowwiseParallel of a Linear with a bias is not simulated yet");
    MEMSIM_RETURN_IF_ERROR(Divide(op.inputs[1], 1, op));
    Op lin = op;
    const TensorId partial = NewTensor(op.name + ":partial", op);
    lin.outputs = {partial};
    const TensorId result = op.outputs[0];
    out.ops.push_back(std::move(lin));
    out.ops.push_back(Collective(OpKind::kAllReduce, op, partial, result, op.name + ":all_reduce"));
    return Status::OK();
  }

  Status Other(const Op& op) {
    bool any = false;
    for (TensorId t : op.inputs) any = any || sharded[t];
    Op copy = op;
    if (any) {
      MEMSIM_RETURN_IF_ERROR(DivideShape(&copy));
      for (TensorId t : copy.outputs) sharded[t] = true;
    }
    out.ops.push_back(std::move(copy));
    return Status::OK();
  }
};

}  // namespace

std::string TpStyleOf(const std::string& plan, const std::string& module) {
  if (plan != "layers") return "";
  static const std::set<std::string> kColwise = {"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj",
                                                 "wq", "wk", "wv", "w1", "w3"};
  static const std::set<std::string> kRowwise = {"o_proj", "down_proj", "wo", "w2"};
  const std::string last = LastPart(module);
  if (kColwise.count(last)) return "colwise";
  if (kRowwise.count(last)) return "rowwise";
  return "";
}

Result<Graph> ApplyTensorParallel(const Graph& g, const TensorParallelConfig& c) {
  const std::string opt = "--mesh tp=" + std::to_string(c.degree);
  if (c.plan != "layers")
    return Status::InvalidArgument("--tp-plan " + c.plan + ": unknown plan (expected layers)");
  if (c.sequence_parallel)
    return Status::Unsupported(opt + " --sequence-parallel on: sequence parallelism is not simulated yet");
  Rewrite r{c, g, std::vector<bool>(g.tensors.size(), false), {}};
  r.out.ops.clear();
  size_t linears = 0;
  for (const Op& op : g.ops) {
    const bool linear = op.kind == OpKind::kLinear && op.inputs.size() >= 2 &&
                        g.tensors[op.inputs[1]].role == TensorRole::kParameter;
    const std::string style = linear ? TpStyleOf(c.plan, op.module) : "";
    if (style == "colwise") {
      MEMSIM_RETURN_IF_ERROR(r.Colwise(op));
    } else if (style == "rowwise") {
      MEMSIM_RETURN_IF_ERROR(r.Rowwise(op));
    } else {
      MEMSIM_RETURN_IF_ERROR(r.Other(op));
      continue;
    }
    ++linears;
  }
  if (linears == 0)
    return Status::InvalidArgument(opt + ": the plan " + c.plan + " selects no Linear of " + g.name +
                                   " (it shards q/k/v/o_proj, gate/up/down_proj or wq/wk/wv/wo/w1/w2/w3)");
  Graph& out = r.out;
  out.tp_degree = c.degree;
  out.tp_plan = c.plan;
  out.RelinkProducers();
  return out;
}

}  // namespace memsim
