#include "lib/ir/expert_parallel.h"

#include <set>

namespace memsim {

std::string EpRowsSymbol(size_t routing, int source, int64_t local_expert) {
  return "ep" + std::to_string(routing) + "_s" + std::to_string(source) + "_e" + std::to_string(local_expert);
}
std::string EpExpertSymbol(size_t routing, int64_t local_expert) {
  return "ep" + std::to_string(routing) + "_e" + std::to_string(local_expert);
}
std::string EpReceivedSymbol(size_t routing) { return "ep" + std::to_string(routing) + "_recv"; }

namespace {

/// The rewrite's state: the graph being built and the experts' tensors dropped (the other
/// ranks' experts).
struct EpRewrite {
  EpRewrite(const Graph& graph, int n) : g(graph), degree(n), out(graph) {}

  const Graph& g;
  int degree;
  Graph out;
  std::set<TensorId> dropped;
  std::set<TensorId> sharded;
  // The routing whose experts are being rewritten (between its split and its cat), or -1.
  int64_t routing = -1, local = 0;
  TensorId local_counts = kNone, perm = kNone;
  std::set<TensorId> region;  // the experts' tensors of that routing

  std::string Where() const { return "--mesh ep=" + std::to_string(degree) + ": " + g.name; }

  TensorId NewTensor(const std::string& name, const Op& at) {
    Tensor t;
    t.name = name;
    t.pointer = at.pointer;
    out.tensors.push_back(std::move(t));
    return static_cast<TensorId>(out.tensors.size() - 1);
  }

  DimExpr Symbol(const std::string& name, std::optional<int64_t> value) {
    uint32_t id = out.FindSymbol(name);
    if (id == kNone) {
      out.symbols.push_back(name);
      out.symbol_defaults.push_back(value);
      id = static_cast<uint32_t>(out.symbols.size() - 1);
    }
    return DimExpr{1, {id}};
  }

  /// The bincount whose counts the split at |at| uses: the last one before it.
  TensorId CountsOf(size_t at) const {
    for (size_t i = at; i-- > 0;)
      if (g.ops[i].kind == OpKind::kBincount) return g.ops[i].outputs[0];
    return kNone;
  }

  /// The routed split: ep_dispatch, then the split over the local experts.
  Status Dispatch(const Op& op, size_t at, int64_t l) {
    const int64_t experts = g.routing[l].experts;
    if (experts % degree != 0)
      return Status::InvalidArgument(Where() + ": routing " + std::to_string(l) + " has " + std::to_string(experts) +
                                     " experts, not divisible by " + std::to_string(degree) +
                                     " (each rank keeps E/N experts); choose an ep degree that divides it");
    const TensorId counts = CountsOf(at);
    if (counts == kNone)
      return Status::InvalidArgument(Where() + ": the routed split " + op.name + " has no bincount of its counts before it");
    routing = l;
    local = experts / degree;
    // Balanced defaults: every source sends each expert the same rows (Note [Routed token counts]).
    const std::optional<int64_t> tokens = g.routing[l].tokens.Eval(g.symbol_defaults);
    auto share = [&](int64_t parts) -> std::optional<int64_t> {
      if (!tokens) return std::nullopt;
      return *tokens / experts * parts;
    };
    std::vector<DimExpr> rows, sections;
    for (int64_t j = 0; j < local; ++j) {
      for (int s = 0; s < degree; ++s) rows.push_back(Symbol(EpRowsSymbol(l, s, j), share(1)));
      sections.push_back(Symbol(EpExpertSymbol(l, j), share(degree)));
    }
    Op d;
    d.kind = OpKind::kEpDispatch;
    d.name = op.name + ":ep_dispatch";
    d.module = op.module;
    d.pointer = op.pointer;
    const TensorId received = NewTensor(d.name, op);
    local_counts = NewTensor(d.name + ":counts", op);
    perm = NewTensor(d.name + ":permutation", op);
    d.inputs = {op.inputs[0], counts};
    d.outputs = {received, local_counts, perm};
    d.attrs.Set("world", DimExpr::Const(degree));
    d.attrs.Set("recv", Symbol(EpReceivedSymbol(l), share(local * degree)));
    d.attrs.Set("rows", rows);
    out.ops.push_back(std::move(d));
    Op split = op;
    split.inputs = {received};
    split.outputs.resize(local);
    split.attrs.Set("sections", sections);
    for (size_t i = 0; i < op.outputs.size(); ++i) (i < static_cast<size_t>(local) ? region : dropped).insert(op.outputs[i]);
    out.ops.push_back(std::move(split));
    return Status::OK();
  }

  /// An op between the split and the cat: dropped if it belongs to another rank's expert; an
  /// expert's weight select shards the weight on dim 0.
  Status Expert(const Op& op) {
    bool drop = false;
    for (TensorId t : op.inputs) drop = drop || dropped.count(t) > 0;
    if (op.kind == OpKind::kSelect && !op.inputs.empty() && g.tensors[op.inputs[0]].role == TensorRole::kParameter) {
      const int64_t e = op.attrs.GetInt("index", g.symbol_defaults).value_or(0);
      drop = drop || e >= local;
      MEMSIM_RETURN_IF_ERROR(Shard(op.inputs[0], op));
    }
    for (TensorId t : op.outputs) (drop ? dropped : region).insert(t);
    if (!drop) Keep(op);
    return Status::OK();
  }

  Status Shard(TensorId p, const Op& op) {
    if (sharded.count(p)) return Status::OK();
    Tensor& t = out.tensors[p];
    if (t.shape.empty() || !t.shape[0].is_const() || t.shape[0].coeff != g.routing[routing].experts)
      return Status::InvalidArgument(Where() + ": " + op.name + " selects an expert of " + t.name +
                                     ", whose dim 0 is not the routing's " + std::to_string(g.routing[routing].experts) +
                                     " experts");
    t.shape[0].coeff /= degree;
    sharded.insert(p);
    out.ep_shards.push_back(p);
    return Status::OK();
  }

  /// The experts' cat: only the local experts' outputs, then ep_combine in its place.
  void Combine(const Op& op) {
    Op cat = op;
    cat.inputs.clear();
    for (TensorId t : op.inputs)
      if (!dropped.count(t)) cat.inputs.push_back(t);
    const TensorId experts_out = NewTensor(op.name + ":local", op);
    cat.outputs = {experts_out};
    Keep(cat);
    Op c;
    c.kind = OpKind::kEpCombine;
    c.name = op.name + ":ep_combine";
    c.module = op.module;
    c.pointer = op.pointer;
    c.inputs = {experts_out, perm, local_counts};
    c.outputs = {op.outputs[0]};
    c.attrs.Set("rows", g.routing[routing].tokens);
    out.ops.push_back(std::move(c));
    routing = -1;
    region.clear();
  }

  /// |op| without the dropped tensors it keeps alive.
  void Keep(Op op) {
    std::vector<TensorId> keep;
    for (TensorId t : op.keep_alive)
      if (!dropped.count(t)) keep.push_back(t);
    op.keep_alive = std::move(keep);
    out.ops.push_back(std::move(op));
  }
};

bool IsCatOf(const Op& op, const std::set<TensorId>& region) {
  if (op.kind != OpKind::kCat) return false;
  for (TensorId t : op.inputs)
    if (region.count(t)) return true;
  return false;
}

}  // namespace

Result<Graph> ApplyExpertParallel(const Graph& g, int degree) {
  EpRewrite r(g, degree);
  if (g.routing.empty())
    return Status::InvalidArgument(r.Where() + " has no mixture-of-experts routing (Note [Routed token counts]); "
                                   "expert parallelism shards the experts of a routed split");
  r.out.ops.clear();
  r.out.ep_shards.clear();
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    const std::optional<int64_t> l = op.kind == OpKind::kSplit ? op.attrs.GetInt("routing", g.symbol_defaults) : std::nullopt;
    if (r.routing >= 0 && IsCatOf(op, r.region)) {
      r.Combine(op);
    } else if (r.routing >= 0) {
      MEMSIM_RETURN_IF_ERROR(r.Expert(op));
    } else if (l && *l >= 0 && static_cast<size_t>(*l) < g.routing.size()) {
      MEMSIM_RETURN_IF_ERROR(r.Dispatch(op, i, *l));
    } else {
      r.Keep(op);
    }
  }
  if (r.routing >= 0)
    return Status::InvalidArgument(r.Where() + ": the experts of routing " + std::to_string(r.routing) +
                                   " have no cat of their outputs (torchtitan's GroupedExperts)");
  r.out.ep_degree = degree;
  r.out.RelinkProducers();
  return std::move(r.out);
}

}  // namespace memsim
