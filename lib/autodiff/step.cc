#include "lib/autodiff/step.h"

#include <algorithm>
#include <map>
#include <queue>

#include "lib/stream/ledger.h"
#include "lib/ops/op_rules.h"
#include "lib/util/check.h"

namespace memsim {
namespace {

constexpr uint32_t kNo = UINT32_MAX;
using StorageId = Ledger::StorageId;

/// A gradient value in flight: its storage and its layout (views of grads are not contiguous).
struct Grad {
  StorageId s = kNo;
  TensorMeta meta;
  bool defined() const { return s != kNo; }
};

/// The autograd node of one forward op.
struct Node {
  bool exists = false;
  uint32_t rg = 0;                    ///< bit i: input i requires grad
  std::vector<StorageId> saved;
  std::vector<bool> released;
  std::vector<Grad> buffer;           ///< InputBuffer: one slot per output
  int deps = 0;                       ///< edges from reachable nodes not yet delivered
  bool reachable = false;
};

/// Layout of the grad a pass-through backward hands to input |i|, or nullopt when PyTorch
/// must copy (reshape of a non-viewable grad).
std::optional<TensorMeta> AliasGradMeta(const Op& op, const Bindings& b, const TensorMeta& grad,
                                        const TensorMeta& in) {
  TensorMeta m = grad;
  switch (op.kind) {
    case OpKind::kAdd: case OpKind::kSub: case OpKind::kBaddbmm: case OpKind::kLinear:
      return m;  // same shape as the output; validate_outputs reduces a broadcast input
    case OpKind::kTranspose: {
      auto a = WrapDim(op.attrs.GetInt("dim0", b).value_or(0), in.dim());
      auto c = WrapDim(op.attrs.GetInt("dim1", b).value_or(1), in.dim());
      if (a && c && in.dim() > 0) {
        std::swap(m.sizes[*a], m.sizes[*c]);
        std::swap(m.strides[*a], m.strides[*c]);
      }
      return m;
    }
    case OpKind::kPermute: {
      auto dims = op.attrs.GetInts("dims", b).value_or(std::vector<int64_t>{});
      if (static_cast<int64_t>(dims.size()) != in.dim()) return m;
      for (size_t k = 0; k < dims.size(); ++k) {
        int64_t d = *WrapDim(dims[k], in.dim());
        m.sizes[d] = grad.sizes[k];
        m.strides[d] = grad.strides[k];
      }
      return m;
    }
    case OpKind::kCat:
      m.sizes = in.sizes;
      return m;
    case OpKind::kStack: {
      auto d = WrapDim(op.attrs.GetInt("dim", b).value_or(0), in.dim() + 1);
      m.sizes = in.sizes;
      m.strides.erase(m.strides.begin() + (d ? *d : 0));
      return m;
    }
    case OpKind::kSum:
      m.sizes = in.sizes;
      m.strides.assign(in.sizes.size(), 0);  // grad.expand(sizes)
      return m;
    default: {
      auto st = ViewStrides(grad.sizes, grad.strides, in.sizes);
      if (!st) return std::nullopt;
      m.sizes = in.sizes;
      m.strides = *st;
      return m;
    }
  }
}

class StepRunner {
 public:
  StepRunner(const Graph& g, const BoundGraph& b, const StepConfig& cfg)
      : g_(g), b_(b), cfg_(cfg) {}

  /// What Explain() recorded.
  std::vector<Retention> TakeExplanation() { return std::move(explained_); }

  /// Runs the step, calling Explain() right after event |probe_at| (SIZE_MAX: never).
  Result<EventStream> Run(const Bindings& bindings, size_t probe_at = SIZE_MAX) {
    bindings_ = bindings;
    if (probe_at != SIZE_MAX) ledger_.set_probe(probe_at, [this] { Explain(); });
    rg_ = PropagateRequiresGrad(g_, b_, cfg_.frozen);
    storage_.assign(g_.tensors.size(), kNo);
    param_index_.assign(g_.tensors.size(), kNo);
    for (size_t k = 0; k < g_.parameters.size(); ++k) param_index_[g_.parameters[k]] = uint32_t(k);
    held_.assign(g_.tensors.size(), false);
    for (TensorId t : g_.outputs) held_[t] = true;
    if (g_.loss != kNone) held_[g_.loss] = true;
    nodes_.assign(g_.ops.size(), Node{});
    param_buffer_.assign(g_.parameters.size(), Grad{});
    param_deps_.assign(g_.parameters.size(), 0);
    param_grad_.assign(g_.parameters.size(), kNo);

    Setup();
    phase_ = Phase::kForward;
    ledger_.set_phase(Phase::kForward);
    for (OpId o = 0; o < g_.ops.size(); ++o) Forward(o);
    phase_ = Phase::kBackward;
    ledger_.set_phase(Phase::kBackward);
    Backward();
    phase_ = Phase::kOptimizer;
    ledger_.set_phase(Phase::kOptimizer);
    ledger_.set_op(kNoOp);
    OptimizerAndZeroGrad();
    return std::move(ledger_).Finish();
  }

 private:
  RuleCtx Ctx(OpId o) const { return MakeRuleCtx(g_, b_, *cfg_.profile, o, &rg_); }

  void Setup() {
    ledger_.set_phase(Phase::kSetup);
    // model.to(device): module by module, children first (see ModuleApplyOrder).
    for (TensorId t : ModuleApplyOrder(g_))
      storage_[t] = ledger_.Alloc(b_.metas[t].bytes(), g_.tensors[t].name, Category::kParameter);
    CreateResidentState(cfg_.optimizer, *cfg_.profile, cfg_.first_step, OptParams(), &ledger_, &states_);
    // A steady step finds the cuBLAS workspaces (main and autograd thread) of an earlier step.
    if (!cfg_.first_step && cfg_.profile->cublas_workspace_bytes > 0 &&
        std::any_of(g_.ops.begin(), g_.ops.end(), [](const Op& op) { return IsGemm(op.kind); })) {
      cublas_workspace_ = ledger_.Alloc(cfg_.profile->cublas_workspace_bytes, "cuBLAS workspace", Category::kWorkspace);
      cublas_backward_workspace_ = ledger_.Alloc(cfg_.profile->cublas_workspace_bytes, "cuBLAS workspace (autograd thread)",
                                                 Category::kWorkspace);
    }
    for (TensorId t : g_.inputs) storage_[t] = ledger_.Alloc(b_.metas[t].bytes(), g_.tensors[t].name, Category::kInput);
  }

  void Forward(OpId o) {
    const Op& op = g_.ops[o];
    const OpRule& rule = RuleFor(op.kind);
    ledger_.set_op(o);
    RuleCtx c = Ctx(o);
    Node& node = nodes_[o];
    node.exists = c.rg != 0;
    node.rg = c.rg;
    FwdPlan plan;
    if (rule.forward) rule.forward(c, &plan);

    std::vector<bool> explicit_out(op.outputs.size(), false);
    for (const auto& a : plan.actions)
      if (a.kind == FwdPlan::Action::kAllocOutput) explicit_out[a.index] = true;
    auto alloc_output = [&](size_t j) {
      TensorId t = op.outputs[j];
      if (b_.owner[t] != t) {
        storage_[t] = storage_[b_.owner[t]];
        ledger_.Ref(storage_[t]);
      } else {
        storage_[t] = ledger_.Alloc(b_.metas[t].bytes(), g_.tensors[t].name, Category::kActivation, op.module);
      }
    };
    for (size_t j = 0; j < op.outputs.size(); ++j)
      if (!explicit_out[j]) alloc_output(j);
    std::vector<StorageId> extras(plan.extras.size(), kNo);
    std::vector<bool> extra_live(plan.extras.size(), false);
    auto is_saved_extra = [&](int k) {
      return node.exists && std::any_of(plan.saved.begin(), plan.saved.end(), [&](const SavedRef& r) {
               return r.kind == SavedRef::kExtra && r.index == k;
             });
    };
    for (const auto& a : plan.actions) {
      switch (a.kind) {
        case FwdPlan::Action::kAllocOutput: alloc_output(a.index); break;
        case FwdPlan::Action::kAllocExtra:
          extras[a.index] = ledger_.Alloc(plan.extras[a.index].bytes, op.name + ":" + std::string(plan.extras[a.index].label),
                                          is_saved_extra(a.index) ? Category::kActivation : Category::kTemporary, op.module);
          extra_live[a.index] = true;
          break;
        case FwdPlan::Action::kFreeExtra:
          ledger_.Unref(extras[a.index]);
          extra_live[a.index] = false;
          break;
      }
    }
    if (node.exists) {
      for (const SavedRef& r : plan.saved) {
        StorageId s = r.kind == SavedRef::kInput ? storage_[op.inputs[r.index]]
                      : r.kind == SavedRef::kOutput ? storage_[op.outputs[r.index]]
                                                    : extras[r.index];
        MEMSIM_CHECK(s != kNo);
        ledger_.Ref(s);
        node.saved.push_back(s);
      }
      node.released.assign(node.saved.size(), false);
      node.buffer.assign(op.outputs.size(), Grad{});
    }
    for (size_t k = 0; k < extras.size(); ++k)
      if (extra_live[k]) ledger_.Unref(extras[k]);
    // The first GEMM creates the cuBLAS workspace, after its output; it lives on.
    if (IsGemm(op.kind) && cfg_.profile->cublas_workspace_bytes > 0 && !cublas_workspace_)
      cublas_workspace_ = ledger_.Alloc(cfg_.profile->cublas_workspace_bytes, "cuBLAS workspace", Category::kWorkspace);
    // Python names: an activation is dropped after its last use unless the caller holds it.
    std::vector<TensorId> seen;
    std::vector<TensorId> released = op.inputs;
    released.insert(released.end(), op.keep_alive.begin(), op.keep_alive.end());
    for (TensorId t : released) {
      if (std::find(seen.begin(), seen.end(), t) != seen.end()) continue;
      seen.push_back(t);
      if (g_.tensors[t].role == TensorRole::kActivation && b_.last_use[t] == o && !held_[t]) ledger_.Unref(storage_[t]);
    }
    for (TensorId t : op.outputs)
      if (b_.last_use[t] == kNone && !held_[t]) ledger_.Unref(storage_[t]);
  }

  /// Where the grad of input |i| of op |o| goes: a node's buffer slot or a parameter.
  struct Edge {
    OpId node = kNo;
    size_t slot = 0;
    uint32_t param = kNo;
  };
  Edge EdgeOf(OpId o, size_t i) const {
    TensorId t = g_.ops[o].inputs[i];
    Edge e;
    if (param_index_[t] != kNo) {
      e.param = param_index_[t];
    } else if (OpId p = g_.tensors[t].producer; p != kNone && nodes_[p].exists) {
      e.node = p;
      const auto& outs = g_.ops[p].outputs;
      e.slot = std::find(outs.begin(), outs.end(), t) - outs.begin();
    }
    return e;
  }

  void CountDependencies(OpId root) {
    std::vector<OpId> stack = {root};
    nodes_[root].reachable = true;
    while (!stack.empty()) {
      OpId o = stack.back();
      stack.pop_back();
      for (size_t i = 0; i < g_.ops[o].inputs.size(); ++i) {
        if (!((nodes_[o].rg >> i) & 1u)) continue;
        Edge e = EdgeOf(o, i);
        if (e.param != kNo) {
          ++param_deps_[e.param];
        } else if (e.node != kNo) {
          ++nodes_[e.node].deps;
          if (!nodes_[e.node].reachable) {
            nodes_[e.node].reachable = true;
            stack.push_back(e.node);
          }
        }
      }
    }
  }

  /// InputBuffer::accumulate: the first grad is moved in; later ones are added in place when
  /// the buffer holds the only reference to a contiguous tensor (2.x), else summed into a new
  /// one (always, on 1.13).
  void Accumulate(Grad* buf, Grad g, TensorId target) {
    if (!buf->defined()) {
      *buf = std::move(g);
      return;
    }
    if (cfg_.profile->accumulate_inplace && ledger_.refs(buf->s) == 1 && buf->meta.is_contiguous()) {
      ledger_.Unref(g.s);
      return;
    }
    const TensorMeta& m = b_.metas[target];
    StorageId sum = ledger_.Alloc(m.bytes(), g_.tensors[target].name + ".grad", Category::kGradient);
    ledger_.Unref(buf->s);
    ledger_.Unref(g.s);
    *buf = Grad{sum, *TensorMeta::Contiguous(m.dtype, m.sizes)};
  }

  /// AccumulateGrad: steals a grad nobody else references and laid out like the parameter,
  /// else copies it.
  void AccumulateGrad(uint32_t k) {
    Grad g = std::move(param_buffer_[k]);
    param_buffer_[k] = Grad{};
    if (!g.defined()) return;
    TensorId t = g_.parameters[k];
    const TensorMeta& m = b_.metas[t];
    if (ledger_.refs(g.s) == 1 && g.meta.is_contiguous() && g.meta.sizes == m.sizes) {
      param_grad_[k] = g.s;
      return;
    }
    param_grad_[k] = ledger_.Alloc(m.bytes(), g_.tensors[t].name + ".grad", Category::kGradient);
    ledger_.Unref(g.s);
  }

  void RunNode(OpId o, std::priority_queue<OpId>* ready) {
    const Op& op = g_.ops[o];
    const OpRule& rule = RuleFor(op.kind);
    ledger_.set_op(o);
    RuleCtx c = Ctx(o);
    Node& node = nodes_[o];
    BwdPlan plan;
    if (rule.backward) {
      rule.backward(c, &plan);
    } else {
      for (int i = 0; i < c.num_in(); ++i)
        if (c.rg_in(i)) plan.GradNew(i);
    }
    std::vector<Grad> produced(op.inputs.size());
    std::vector<StorageId> temps(plan.num_temps, kNo);
    auto grad_name = [&](size_t i) { return g_.tensors[op.inputs[i]].name + ".grad"; };
    auto new_grad = [&](size_t i) {
      const TensorMeta& in = *c.in[i];
      return Grad{ledger_.Alloc(in.bytes(), grad_name(i), Category::kGradient, op.module),
                  *TensorMeta::Contiguous(in.dtype, in.sizes)};
    };
    for (const auto& a : plan.actions) {
      switch (a.kind) {
        case BwdPlan::Action::kGradNew:
          produced[a.index] = new_grad(a.index);
          // Backward runs on the autograd engine's device thread, whose cuBLAS handle gets its
          // own workspace inside its first GEMM, after that GEMM's output.
          if (IsGemm(op.kind) && cfg_.profile->cublas_workspace_bytes > 0 && cfg_.profile->cuda &&
              !cublas_backward_workspace_)
            cublas_backward_workspace_ = ledger_.Alloc(cfg_.profile->cublas_workspace_bytes,
                                                       "cuBLAS workspace (autograd thread)", Category::kWorkspace);
          break;
        case BwdPlan::Action::kGradAlias: {
          const Grad& src = node.buffer[0];
          if (!src.defined()) break;
          auto meta = AliasGradMeta(op, bindings_, src.meta, *c.in[a.index]);
          if (!meta) {
            produced[a.index] = new_grad(a.index);
          } else {
            ledger_.Ref(src.s);
            produced[a.index] = Grad{src.s, std::move(*meta)};
          }
          break;
        }
        case BwdPlan::Action::kTemp:
          temps[a.index] = ledger_.Alloc(a.bytes, op.name + ":" + std::string(a.label), Category::kTemporary, op.module);
          break;
        case BwdPlan::Action::kFreeTemp:
          ledger_.Unref(temps[a.index]);
          temps[a.index] = kNo;
          break;
        case BwdPlan::Action::kReleaseSaved:
          if (a.index < static_cast<int>(node.saved.size()) && !node.released[a.index]) {
            ledger_.Unref(node.saved[a.index]);
            node.released[a.index] = true;
          }
          break;
      }
    }
    // validate_outputs: a grad shaped like a broadcast result is summed to the input's shape.
    for (size_t i = 0; i < produced.size(); ++i) {
      if (!produced[i].defined() || produced[i].meta.sizes == c.in[i]->sizes) continue;
      Grad reduced = new_grad(i);
      ledger_.Unref(produced[i].s);
      produced[i] = std::move(reduced);
    }
    for (Grad& in : node.buffer)
      if (in.defined()) ledger_.Unref(in.s);
    node.buffer.clear();
    for (size_t k = 0; k < node.saved.size(); ++k)
      if (!node.released[k]) ledger_.Unref(node.saved[k]);
    node.saved.clear();
    for (StorageId t : temps)
      if (t != kNo) ledger_.Unref(t);
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      if (!((node.rg >> i) & 1u)) continue;
      Edge e = EdgeOf(o, i);
      if (e.param != kNo) {
        if (produced[i].defined()) Accumulate(&param_buffer_[e.param], std::move(produced[i]), op.inputs[i]);
        if (--param_deps_[e.param] == 0) AccumulateGrad(e.param);
      } else if (e.node != kNo) {
        if (produced[i].defined()) Accumulate(&nodes_[e.node].buffer[e.slot], std::move(produced[i]), op.inputs[i]);
        if (--nodes_[e.node].deps == 0) ready->push(e.node);
      } else if (produced[i].defined()) {
        ledger_.Unref(produced[i].s);
      }
      produced[i] = Grad{};
    }
    for (Grad& p : produced)
      if (p.defined()) ledger_.Unref(p.s);
  }

  void Backward() {
    // The caller's names (`out`, `loss`) each hold one reference, once per tensor.
    std::vector<TensorId> release_order;
    for (TensorId t : g_.outputs)
      if (std::find(release_order.begin(), release_order.end(), t) == release_order.end()) release_order.push_back(t);
    if (g_.loss != kNone && std::find(release_order.begin(), release_order.end(), g_.loss) == release_order.end())
      release_order.push_back(g_.loss);
    const bool trainable = g_.loss != kNone && rg_[g_.loss] && g_.tensors[g_.loss].producer != kNone;
    if (trainable) {
      OpId root = g_.tensors[g_.loss].producer;
      CountDependencies(root);
      ledger_.set_op(root);
      // loss.backward(): the ones-like seed is held by the caller until backward returns.
      const TensorMeta& lm = b_.metas[g_.loss];
      StorageId seed = ledger_.Alloc(lm.bytes(), g_.tensors[g_.loss].name + ".grad (seed)", Category::kGradient);
      ledger_.Ref(seed);
      const auto& outs = g_.ops[root].outputs;
      size_t slot = std::find(outs.begin(), outs.end(), g_.loss) - outs.begin();
      nodes_[root].buffer[slot] = Grad{seed, *TensorMeta::Contiguous(lm.dtype, lm.sizes)};
      std::priority_queue<OpId> ready;  // the engine runs the most recently created node first
      ready.push(root);
      while (!ready.empty()) {
        OpId o = ready.top();
        ready.pop();
        RunNode(o, &ready);
      }
      ledger_.set_op(kNoOp);
      ledger_.Unref(seed);
    }
    ledger_.set_op(kNoOp);
    // `del out, loss`, then whatever graph is left unreached is destroyed with them.
    for (TensorId t : release_order)
      if (storage_[t] != kNo) ledger_.Unref(storage_[t]);
    for (Node& n : nodes_) {
      for (size_t k = 0; k < n.saved.size(); ++k)
        if (!n.released[k]) ledger_.Unref(n.saved[k]);
      n.saved.clear();
      for (Grad& gbuf : n.buffer)
        if (gbuf.defined()) ledger_.Unref(gbuf.s);
      n.buffer.clear();
    }
  }

  std::vector<OptParam> OptParams() const {
    std::vector<OptParam> ps;
    for (size_t k = 0; k < g_.parameters.size(); ++k) {
      TensorId t = g_.parameters[k];
      if (!rg_[t]) continue;
      ps.push_back(OptParam{g_.tensors[t].name, b_.metas[t].bytes(), param_grad_.empty() ? kNo : param_grad_[k]});
    }
    return ps;
  }

  void RecordFunctionScratch() {
    if (!cfg_.profile->record_function_scratch) return;
    StorageId z = ledger_.Alloc(4, "record_function zeros", Category::kTemporary);
    StorageId h = ledger_.Alloc(288, "record_function handle", Category::kTemporary);
    ledger_.Unref(h);
    ledger_.Unref(z);
  }

  void OptimizerAndZeroGrad() {
    if (cfg_.optimizer.name == "none") return;
    RecordFunctionScratch();
    RunOptimizerStep(cfg_.optimizer, *cfg_.profile, cfg_.first_step, OptParams(), &ledger_, &states_);
    RecordFunctionScratch();
    for (StorageId s : param_grad_)
      if (s != kNo) ledger_.Unref(s);
  }

  /// Records who holds each live storage (see ExplainAtEvent).
  void Explain() {
    std::map<StorageId, std::vector<std::string>> why;
    const uint32_t op = ledger_.op();
    const bool forward = phase_ == Phase::kForward;
    for (TensorId t = 0; t < g_.tensors.size(); ++t) {
      StorageId s = storage_[t];
      if (s == kNo) continue;
      const Tensor& tensor = g_.tensors[t];
      switch (tensor.role) {
        case TensorRole::kParameter: why[s].push_back("parameter " + tensor.name); break;
        case TensorRole::kBuffer: why[s].push_back("module buffer " + tensor.name); break;
        case TensorRole::kInput: why[s].push_back("input " + tensor.name + " (held by the caller)"); break;
        case TensorRole::kActivation:
          if (held_[t]) {
            why[s].push_back("\"" + tensor.name + "\" held by the caller until after backward (model output / loss)");
          } else if (forward && b_.last_use[t] != kNone && b_.last_use[t] >= op && tensor.producer <= op) {
            why[s].push_back("Python name \"" + tensor.name + "\", used until " + g_.ops[b_.last_use[t]].name);
          }
          break;
      }
    }
    for (OpId o = 0; o < nodes_.size(); ++o) {
      const Node& n = nodes_[o];
      for (size_t k = 0; k < n.saved.size(); ++k)
        if (!n.released[k]) why[n.saved[k]].push_back("saved by " + g_.ops[o].name + " for its backward");
      for (size_t slot = 0; slot < n.buffer.size(); ++slot)
        if (n.buffer[slot].defined())
          why[n.buffer[slot].s].push_back("grad of \"" + g_.tensors[g_.ops[o].outputs[slot]].name + "\" waiting for " +
                                          g_.ops[o].name + "'s backward");
    }
    for (size_t k = 0; k < g_.parameters.size(); ++k) {
      const std::string& name = g_.tensors[g_.parameters[k]].name;
      if (param_grad_[k] != kNo) why[param_grad_[k]].push_back(".grad of " + name + " (until zero_grad)");
      if (param_buffer_[k].defined()) why[param_buffer_[k].s].push_back("grad of " + name + " being accumulated");
    }
    for (StorageId s : states_) why[s].push_back("optimizer state");
    if (cublas_workspace_) why[*cublas_workspace_].push_back("cuBLAS workspace (kept for the process lifetime)");
    if (cublas_backward_workspace_)
      why[*cublas_backward_workspace_].push_back("cuBLAS workspace of the autograd thread (kept for the process lifetime)");
    for (StorageId s : ledger_.Live()) {
      Retention r{s, why.count(s) ? why[s] : std::vector<std::string>{}};
      if (r.held_by.empty())
        r.held_by.push_back(op < g_.ops.size() ? "in use inside " + g_.ops[op].name + " (" + std::string(PhaseName(phase_)) + ")"
                                               : "in use inside " + std::string(PhaseName(phase_)));
      explained_.push_back(std::move(r));
    }
  }

  std::vector<Retention> explained_;
  Phase phase_ = Phase::kSetup;
  const Graph& g_;
  const BoundGraph& b_;
  const StepConfig& cfg_;
  Bindings bindings_;
  Ledger ledger_;
  std::vector<bool> rg_;
  std::vector<StorageId> storage_;
  std::vector<uint32_t> param_index_;
  std::vector<bool> held_;
  std::vector<Node> nodes_;
  std::vector<Grad> param_buffer_;
  std::vector<int> param_deps_;
  std::vector<StorageId> param_grad_;
  std::vector<StorageId> states_;
  std::optional<StorageId> cublas_workspace_;
  std::optional<StorageId> cublas_backward_workspace_;
};

}  // namespace

Result<EventStream> SimulateStep(const Graph& g, const BoundGraph& bound, const StepConfig& cfg) {
  MEMSIM_CHECK(cfg.profile != nullptr);
  return StepRunner(g, bound, cfg).Run(bound.bindings);
}

std::vector<Retention> ExplainAtEvent(const Graph& g, const BoundGraph& bound, const StepConfig& cfg,
                                      size_t event_index) {
  MEMSIM_CHECK(cfg.profile != nullptr);
  StepRunner runner(g, bound, cfg);
  (void)runner.Run(bound.bindings, event_index);
  return runner.TakeExplanation();
}

}  // namespace memsim
