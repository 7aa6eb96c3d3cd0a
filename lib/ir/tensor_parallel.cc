#include "lib/ir/tensor_parallel.h"

#include <algorithm>
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
  std::map<TensorId, TensorId> gathered;  // sequence parallel: a module input and its all-gathered copy
  std::set<TensorId> top;                 // the embedding's and the output head's weights

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
    if (auto it = features.find(op->inputs[0]); infers && it != features.end() && !shape.empty() &&
                                                  shape.back().is_const() && shape.back().coeff == it->second.first * c.degree) {
      shape.back().coeff = it->second.first;  // the whole features named (the loss's [-1, vocab]): the rank's
      op->attrs.Set(attr, shape);
      return Status::OK();
    }
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

  Op Collective(OpKind kind, const Op& at, TensorId in, TensorId result, const std::string& name, int dim = 0) {
    Op op;
    op.kind = kind;
    op.name = name;
    op.module = at.module;
    op.pointer = at.pointer;
    op.inputs = {in};
    op.outputs = {result};
    op.attrs.Set("world", DimExpr::Const(c.degree));
    if (kind == OpKind::kAllGather || kind == OpKind::kReduceScatter) op.attrs.Set("dim", DimExpr::Const(dim));
    return op;
  }

  /// A Colwise module's input: without sequence parallelism DTensor.from_local (Replicate), whose
  /// backward all-reduces the grad, one per module; with it the module's PrepareModuleInput
  /// all-gathers the sequence shards (Shard(1) → Replicate) once for the Linears that share it.
  TensorId ColwiseInput(const Op& op) {
    const TensorId x = op.inputs[0];
    if (!c.sequence_parallel) {
      const TensorId in = NewTensor(op.name + ":tp_input", op);
      out.ops.push_back(Collective(OpKind::kGradAllReduce, op, x, in, op.name + ":tp_input"));
      return in;
    }
    if (auto it = gathered.find(x); it != gathered.end()) return it->second;
    const TensorId in = NewTensor(op.name + ":sp_all_gather", op);
    out.ops.push_back(Collective(OpKind::kAllGather, op, x, in, op.name + ":sp_all_gather", 1));
    gathered[x] = in;
    return in;
  }

  Status Colwise(const Op& op) {
    MEMSIM_RETURN_IF_ERROR(Divide(op.inputs[1], 0, op));
    if (op.inputs.size() > 2) MEMSIM_RETURN_IF_ERROR(Divide(op.inputs[2], 0, op));
    Op lin = op;
    lin.inputs[0] = ColwiseInput(op);
    for (TensorId t : lin.outputs) sharded[t] = true;
    features[op.outputs[0]] = {out.tensors[op.inputs[1]].shape[0].coeff, op.module};
    out.ops.push_back(std::move(lin));
    return Status::OK();
  }

  /// A RowwiseParallel Linear (or embedding): its Partial output reduced into the result, all-reduced
  /// (Replicate) or, with sequence parallelism, reduce-scattered on the sequence (Shard(1)).
  /// The module's output hook runs inside its call: what the caller's names keep alive across the
  /// call (the op's keep_alive) lives until the collective.
  void Reduce(Op local, const std::string& name) {
    const TensorId partial = NewTensor(local.name + ":partial", local);
    const TensorId result = local.outputs[0];
    local.outputs = {partial};
    Op coll = c.sequence_parallel ? Collective(OpKind::kReduceScatter, local, partial, result, name + ":sp_reduce_scatter", 1)
                                  : Collective(OpKind::kAllReduce, local, partial, result, name + ":all_reduce");
    coll.keep_alive = std::move(local.keep_alive);
    local.keep_alive.clear();
    out.ops.push_back(std::move(local));
    out.ops.push_back(std::move(coll));
  }

  Status Rowwise(const Op& op) {
    if (op.inputs.size() > 2)
      return Status::InvalidArgument("--mesh tp=" + std::to_string(c.degree) + ": " + op.module +
                                     " has a bias; RowwiseParallel of a Linear with a bias is not simulated yet");
    MEMSIM_RETURN_IF_ERROR(Divide(op.inputs[1], 1, op));
    Reduce(op, op.name);
    return Status::OK();
  }

  /// torchtitan's embedding: RowwiseParallel(input_layouts=Replicate()), the weight's rows
  /// (vocabulary) sharded, the lookup masked (tp_embedding), its output reduced.
  Status Embedding(const Op& op) {
    MEMSIM_RETURN_IF_ERROR(Divide(op.inputs[1], 0, op));
    top.insert(op.inputs[1]);
    Op local = op;
    local.kind = OpKind::kTpEmbedding;
    local.attrs.Set("world", DimExpr::Const(c.degree));
    Reduce(std::move(local), op.name);
    return Status::OK();
  }

  /// torchtitan's output head: ColwiseParallel(output_layouts=Replicate()), the vocabulary sharded,
  /// the rank's logits all-gathered on the last dimension.
  Status Head(const Op& op) {
    top.insert(op.inputs[1]);
    // loss_parallel (output_layouts=Shard(-1)): a Colwise Linear whose logits go on to the loss as they are
    if (c.loss_parallel) return Colwise(op);
    MEMSIM_RETURN_IF_ERROR(Divide(op.inputs[1], 0, op));
    if (op.inputs.size() > 2) MEMSIM_RETURN_IF_ERROR(Divide(op.inputs[2], 0, op));
    Op lin = op;
    lin.inputs[0] = ColwiseInput(op);
    const TensorId local = NewTensor(op.name + ":local", op);
    lin.outputs = {local};
    lin.keep_alive.clear();
    out.ops.push_back(std::move(lin));
    // The caller's names (its input among them) live until the module's output hook has gathered.
    Op gather = Collective(OpKind::kAllGather, op, local, op.outputs[0], op.name + ":all_gather", -1);
    gather.keep_alive = op.keep_alive;
    gather.keep_alive.push_back(op.inputs[0]);
    out.ops.push_back(std::move(gather));
    return Status::OK();
  }

  Status Other(const Op& op) {
    bool any = false;
    for (TensorId t : op.inputs) any = any || sharded[t];
    Op copy = op;
    if (any && op.kind == OpKind::kCrossEntropy) {  // loss_parallel(): the sharded logits' cross entropy
      copy.kind = OpKind::kTpCrossEntropy;
      copy.attrs.Set("world", DimExpr::Const(c.degree));
      out.ops.push_back(std::move(copy));
      return Status::OK();
    }
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
  if (plan != "layers" && plan != "torchtitan") return "";
  static const std::set<std::string> kColwise = {"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj",
                                                 "wq", "wk", "wv", "w1", "w3"};
  static const std::set<std::string> kRowwise = {"o_proj", "down_proj", "wo", "w2"};
  const std::string last = LastPart(module);
  if (kColwise.count(last)) return "colwise";
  if (kRowwise.count(last)) return "rowwise";
  if (plan == "torchtitan" && (last == "embed_tokens" || last == "tok_embeddings")) return "embedding";
  if (plan == "torchtitan" && (last == "lm_head" || last == "output")) return "head";
  return "";
}

Result<Graph> ApplyTensorParallel(const Graph& g, const TensorParallelConfig& c) {
  const std::string opt = "--mesh tp=" + std::to_string(c.degree);
  if (c.plan != "layers" && c.plan != "torchtitan")
    return Status::InvalidArgument("--tp-plan " + c.plan + ": unknown plan (expected layers or torchtitan)");
  if (c.loss_parallel && c.plan != "torchtitan")
    return Status::InvalidArgument(opt + " --loss-parallel on: the layers plan keeps the output head replicated; give "
                                   "--tp-plan torchtitan");
  if (c.sequence_parallel && c.plan != "torchtitan")
    return Status::InvalidArgument(opt + " --sequence-parallel on: the layers plan keeps the embedding replicated, so its "
                                   "output is not sharded on the sequence; give --tp-plan torchtitan");
  Rewrite r{c, g, std::vector<bool>(g.tensors.size(), false), {}};
  r.out.ops.clear();
  size_t linears = 0;
  for (const Op& op : g.ops) {
    const bool weighted = (op.kind == OpKind::kLinear || op.kind == OpKind::kEmbedding) && op.inputs.size() >= 2 &&
                          g.tensors[op.inputs[1]].role == TensorRole::kParameter;
    std::string style = weighted ? TpStyleOf(c.plan, op.module) : "";
    if ((style == "embedding") != (op.kind == OpKind::kEmbedding)) style.clear();
    if (style == "colwise") {
      MEMSIM_RETURN_IF_ERROR(r.Colwise(op));
    } else if (style == "rowwise") {
      MEMSIM_RETURN_IF_ERROR(r.Rowwise(op));
    } else if (style == "embedding") {
      MEMSIM_RETURN_IF_ERROR(r.Embedding(op));
    } else if (style == "head") {
      MEMSIM_RETURN_IF_ERROR(r.Head(op));
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
  // torchtitan's apply_tp parallelizes the embedding, the norm and the output head in one
  // parallelize_module call before the layers: their shards are made first.
  std::stable_partition(out.tp_shards.begin(), out.tp_shards.end(), [&](const Graph::TpShard& sh) {
    return r.top.count(sh.param) > 0;
  });
  out.tp_degree = c.degree;
  out.tp_plan = c.plan;
  out.RelinkProducers();
  return out;
}

}  // namespace memsim
