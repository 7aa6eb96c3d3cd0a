// The backward engine: loss.backward() as PyTorch's autograd engine runs it — dependencies
// counted from the loss, ready nodes run most-recently-created first, InputBuffer
// accumulation, validate_outputs reductions, AccumulateGrad stealing or copying into .grad
// (Notes [Engine order], [InputBuffer], [AccumulateGrad steals] in docs/op-rules.md).
#include <algorithm>
#include <queue>

#include "lib/autodiff/state.h"
#include "lib/ops/cuda_reduce.h"

namespace memsim {
namespace {

/// Where the grad of input |i| of op |o| goes: a node's buffer slot or a parameter.
struct Edge {
  OpId node = kNone;
  size_t slot = 0;
  uint32_t param = kNoStorage;
};

Edge EdgeOf(const StepState& s, OpId o, size_t i) {
  TensorId t = s.g.ops[o].inputs[i];
  Edge e;
  if (s.param_index[t] != kNoStorage) {
    e.param = s.param_index[t];
  } else if (OpId p = s.g.tensors[t].producer; p != kNone && s.nodes[p].exists) {
    e.node = p;
    const auto& outs = s.g.ops[p].outputs;
    e.slot = std::find(outs.begin(), outs.end(), t) - outs.begin();
  }
  return e;
}

/// Whether the engine computes the grad of input |i| of node |o|: it requires grad and, in a
/// torch.autograd.grad with inputs (StepState::grad_pass), leads to one of them (exec_info).
bool Computes(const StepState& s, OpId o, size_t i) {
  return s.nodes[o].rg.test(i) && (s.grad_pass == nullptr || s.grad_pass->needed[o].test(i));
}

void CountDependencies(StepState& s, OpId root) {
  std::vector<OpId> stack = {root};
  s.nodes[root].reachable = true;
  while (!stack.empty()) {
    OpId o = stack.back();
    stack.pop_back();
    for (size_t i = 0; i < s.g.ops[o].inputs.size(); ++i) {
      if (!Computes(s, o, i)) continue;
      Edge e = EdgeOf(s, o, i);
      if (e.param != kNoStorage) {
        ++s.param_deps[e.param];
      } else if (e.node != kNone) {
        ++s.nodes[e.node].deps;
        if (!s.nodes[e.node].reachable) {
          s.nodes[e.node].reachable = true;
          stack.push_back(e.node);
        }
      }
    }
  }
}

/// is_non_overlapping_and_dense: the elements fill the storage exactly in some order of the dims.
bool NonOverlappingAndDense(const TensorMeta& m) {
  std::vector<size_t> order(m.sizes.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return m.strides[a] < m.strides[b]; });
  int64_t expected = 1;
  for (size_t k : order) {
    if (m.sizes[k] == 1) continue;
    if (m.strides[k] != expected) return false;
    expected *= m.sizes[k];
  }
  return true;
}

}  // namespace

bool CanAccumulateInplace(const Profile& profile, const Grad& old, int refs) {
  return profile.accumulate_inplace && !profile.dispatch_mode && !old.view && refs == 1 && NonOverlappingAndDense(old.meta);
}

namespace {

/// InputBuffer::accumulate: the first grad is moved in; later ones are added into it in place when
/// CanAccumulateInplace holds (2.x), else summed into a new one (always on 1.13, and under a
/// dispatch mode).
void Accumulate(StepState& s, Grad* buf, Grad g, TensorId target) {
  if (!buf->defined()) {
    *buf = std::move(g);
    return;
  }
  if (CanAccumulateInplace(s.profile, *buf, s.ledger.refs(buf->s))) {
    s.ledger.Unref(g.s);
    return;
  }
  const TensorMeta& m = s.bound.metas[target];
  StorageId sum = s.ledger.AllocJoined(m.bytes(), {s.g.tensors[target].name, ".grad"}, Category::kGradient);
  s.ledger.Unref(buf->s);
  s.ledger.Unref(g.s);
  *buf = Grad{sum, *TensorMeta::Contiguous(m.dtype, m.sizes)};
}

/// The copy of a transposed 2-D tensor into a contiguous one goes through a 60 x 60 block buffer
/// (aten/src/ATen/native/Copy.cpp `copy_transpose_valid`, `_copy_same_type_transpose_`: src
/// stride (1, rows), at least 60 * 60 elements), allocated and freed inside the copy; CPU only.
/// AccumulateGrad's clone_obey_contract copies this way a grad whose strides differ from the
/// parameter's (a compiled region's transposed weight grad).
void TransposeCopyScratch(StepState& s, const TensorMeta& src, const std::string& name) {
  constexpr int64_t kBlock = 60;
  if (s.profile.cuda || src.dim() != 2 || src.strides[0] != 1 || src.strides[1] != src.sizes[0] || src.numel() < kBlock * kBlock) return;
  StorageId buf = s.ledger.AllocJoined(kBlock * kBlock * ElementSize(src.dtype), {name, ".grad copy block"},
                                       Category::kTemporary);
  s.ledger.Unref(buf);
}

/// AccumulateGrad: steals a grad nobody else references and laid out like the parameter,
/// else copies it; a .grad that exists already (an earlier pass) is added to in place.
void AccumulateGrad(StepState& s, uint32_t k) {
  Grad g = std::move(s.param_buffer[k]);
  s.param_buffer[k] = Grad{};
  if (!g.defined()) return;
  TensorId t = s.LeafTensor(k);
  const TensorMeta& m = s.bound.metas[t];
  if (s.param_grad[k] != kNoStorage) {
    s.ledger.Unref(g.s);  // variable.grad += new_grad
  } else if (s.ledger.refs(g.s) == 1 && g.meta.is_contiguous() && g.meta.sizes == m.sizes) {
    s.param_grad[k] = g.s;
  } else {
    s.param_grad[k] = s.ledger.AllocJoined(m.bytes(), {s.g.tensors[t].name, ".grad"}, Category::kGradient);
    TransposeCopyScratch(s, g.meta, s.g.tensors[t].name);
    s.ledger.Unref(g.s);
  }
  if (k < s.g.parameters.size()) s.Hook(&TrainingSetup::OnGradReady, k);
}

/// The node lets go of what it saved (release_variables): at the end of its backward, or when the
/// graph is destroyed without it having run.
void ReleaseSaved(StepState& s, Node& node) {
  for (size_t k = 0; k < node.saved.size(); ++k)
    if (!node.released[k]) s.ledger.Unref(node.saved[k]);
  node.saved.clear();
  for (StorageId st : node.unhooked) s.ledger.Unref(st);
  node.unhooked.clear();
  for (StorageId st : node.earlier_tasks) s.ledger.Unref(st);
  node.earlier_tasks.clear();
}

/// Runs node |o|'s plan; returns the grad it produces for each input.
std::vector<Grad> RunNodePlan(StepState& s, OpId o, const RuleCtx& c) {
  const Op& op = s.g.ops[o];
  const OpRule& rule = RuleFor(op.kind);
  Node& node = s.nodes[o];
  BwdPlan plan;
  if (rule.backward) {
    rule.backward(c, &plan);
  } else {
    for (int i = 0; i < c.num_in(); ++i)
      if (c.rg_in(i)) plan.GradNew(i);
  }
  std::vector<Grad> produced(op.inputs.size());
  std::vector<StorageId> temps(plan.num_temps, kNoStorage);
  // A new grad for input |i| laid out as |layout| (input-sized).
  auto grad_like = [&](size_t i, const TensorMeta& layout) {
    return Grad{s.ledger.AllocJoined(layout.bytes(), {s.g.tensors[op.inputs[i]].name, ".grad"}, Category::kGradient,
                                     op.module),
                layout};
  };
  auto new_grad = [&](size_t i) { return grad_like(i, *TensorMeta::Contiguous(c.in[i]->dtype, c.in[i]->sizes)); };
  for (const auto& a : plan.actions) {
    switch (a.kind) {
      case BwdPlan::Action::kGradNew:
      case BwdPlan::Action::kGradNewView:
        if (a.bytes > 0) {  // the grad views a larger buffer: its storage is that buffer's size
          produced[a.index] = Grad{s.ledger.AllocJoined(a.bytes, {s.g.tensors[op.inputs[a.index]].name, ".grad"},
                                                        Category::kGradient, op.module),
                                   *TensorMeta::Contiguous(c.in[a.index]->dtype, c.in[a.index]->sizes)};
        } else {
          produced[a.index] = new_grad(a.index);
        }
        produced[a.index].view = a.kind == BwdPlan::Action::kGradNewView;
        if (rule.gemm) s.workspaces.OnGemm(LibraryWorkspaces::kAutogradThread, &s.ledger);
        break;
      case BwdPlan::Action::kGradAlias: {
        const Grad& src = node.buffer[0];
        if (!src.defined()) break;
        auto meta = AliasGrad(op, s.bound.bindings, src.meta, *c.in[a.index]);
        if (!meta) {
          produced[a.index] = new_grad(a.index);
        } else {
          // AddBackward & co. return the grad itself; every other alias is a view of it
          s.ledger.Ref(src.s);
          produced[a.index] = Grad{src.s, std::move(*meta), src.view || rule.alias_grad != AliasGradSame};
        }
        break;
      }
      case BwdPlan::Action::kTemp:
        temps[a.index] = s.ledger.AllocJoined(a.bytes, {op.name, ":", a.label}, Category::kTemporary, op.module);
        break;
      case BwdPlan::Action::kFreeTemp:
        s.ledger.Unref(temps[a.index]);
        temps[a.index] = kNoStorage;
        break;
      case BwdPlan::Action::kGradNewLike:
        produced[a.index] = grad_like(a.index, plan.layouts[a.bytes]);
        break;
      case BwdPlan::Action::kReleaseGradOut:
        for (Grad& in : node.buffer) {
          if (in.defined()) s.ledger.Unref(in.s);
          in = Grad{};
        }
        break;
      case BwdPlan::Action::kReleaseSaved:
        if (s.grad_pass && s.grad_pass->retain) break;
        if (a.index < static_cast<int>(node.saved.size()) && !node.released[a.index]) {
          s.ledger.Unref(node.saved[a.index]);
          node.released[a.index] = true;
        }
        break;
    }
  }
  // validate_outputs: a grad shaped like a broadcast result is summed to the input's shape,
  // and one of another dtype (a promoted result under autocast) is cast to the input's dtype.
  for (size_t i = 0; i < produced.size(); ++i) {
    if (!produced[i].defined()) continue;
    if (produced[i].meta.sizes != c.in[i]->sizes) {
      Grad reduced = new_grad(i);
      // CUDA: the sum's kernel may stage partial sums in global memory (Note [CUDA reduction staging]).
      const ReduceStaging st = CudaReduceStaging(s.profile, produced[i].meta, c.in[i]->sizes,
                                                 produced[i].meta.dtype == Dtype::kFloat64 ? 8 : 4);
      if (st.buffer_bytes > 0) {
        StorageId buf = s.ledger.AllocJoined(st.buffer_bytes, {op.name, ":reduce staging"}, Category::kTemporary, op.module);
        s.ledger.Unref(s.ledger.AllocJoined(st.semaphore_bytes, {op.name, ":reduce semaphores"}, Category::kTemporary, op.module));
        s.ledger.Unref(buf);
      }
      s.ledger.Unref(produced[i].s);
      produced[i] = std::move(reduced);
    }
    if (produced[i].meta.dtype != c.in[i]->dtype) {
      Grad cast = new_grad(i);
      s.ledger.Unref(produced[i].s);
      produced[i] = std::move(cast);
    }
  }
  for (Grad& in : node.buffer)
    if (in.defined()) s.ledger.Unref(in.s);
  node.buffer.clear();
  if (!s.grad_pass || !s.grad_pass->retain) ReleaseSaved(s, node);
  for (StorageId t : temps)
    if (t != kNoStorage) s.ledger.Unref(t);
  return produced;
}

/// save_on_cpu's unpack hook (Note [Activation offloading]): as the node's apply begins, each
/// saved tensor packed into host memory is copied back to the device (`packed.to(device)`); the
/// copy is what the node holds from then on.
void UnpackSaved(StepState& s, Node& node, const Op& op) {
  for (size_t k = 0; k < node.saved.size(); ++k) {
    if (node.released[k]) continue;
    const int64_t host = s.ledger.host_bytes(node.saved[k]);
    if (host == 0) continue;
    StorageId device = s.ledger.AllocJoined(host, {op.name, ":saved (unpacked)"}, Category::kActivation, op.module);
    s.ledger.Unref(node.saved[k]);
    node.saved[k] = device;
  }
}

void RunNode(StepState& s, OpId o, std::priority_queue<OpId>* ready) {
  const Op& op = s.g.ops[o];
  s.ledger.set_op(o);
  s.Hook(&TrainingSetup::BeforeBackwardNode, o);
  UnpackSaved(s, s.nodes[o], op);
  RuleCtx c = s.Ctx(o);
  if (GradPass* pass = s.grad_pass) {
    RgMask computed;  // the node computes the grads of the edges exec_info marks only
    for (size_t i = 0; i < op.inputs.size(); ++i)
      if (c.rg.test(i) && pass->needed[o].test(i)) computed.set(i);
    c.rg = computed;
    if (!pass->capture.empty() && pass->capture[o]) {  // the prehook keeps the grads flowing in
      pass->captured[o] = s.nodes[o].buffer;
      for (const Grad& gr : pass->captured[o])
        if (gr.defined()) s.ledger.Ref(gr.s);
    }
  }
  if (!s.nodes[o].buffer.empty() && s.nodes[o].buffer[0].defined()) c.grad_out = &s.nodes[o].buffer[0].meta;
  for (const Grad& gr : s.nodes[o].buffer) c.grad_outs.push_back(gr.defined() ? &gr.meta : nullptr);
  std::vector<Grad> produced = RunNodePlan(s, o, c);
  Node& node = s.nodes[o];
  // The setups see the grads in input order (autocast's ToCopyBackward nodes run in that order:
  // cached_cast made the casts right to left); the engine then hands them on in the order of the
  // ATen node's outputs (OpRule::dispatch_first, Note [Recurrent layers]).
  for (size_t i = 0; i < op.inputs.size(); ++i)
    if (node.rg.test(i)) s.Hook(&TrainingSetup::OnInputGrad, o, i, &produced[i]);
  int first = RuleFor(op.kind).dispatch_first;
  // An input autocast copied reaches its edge through its own ToCopyBackward node, which runs
  // after the later arguments' casts: input order again.
  if (first >= 0 && o < s.bound.casts.size())
    for (const InputCast& cast : s.bound.casts[o])
      if (cast.input == first && cast.copy) first = -1;
  const size_t n = op.inputs.size();
  for (size_t k = 0; k < n; ++k) {
    size_t i = k;
    if (first >= 0 && static_cast<size_t>(first) < n) i = k == 0 ? first : (k <= static_cast<size_t>(first) ? k - 1 : k);
    if (!Computes(s, o, i)) continue;
    Edge e = EdgeOf(s, o, i);
    if (e.param != kNoStorage) {
      if (produced[i].defined()) Accumulate(s, &s.param_buffer[e.param], std::move(produced[i]), op.inputs[i]);
      // torch.autograd.grad returns the grads of its inputs: they stay in param_buffer.
      if (--s.param_deps[e.param] == 0 && !s.grad_pass) AccumulateGrad(s, e.param);
    } else if (e.node != kNone) {
      if (produced[i].defined()) Accumulate(s, &s.nodes[e.node].buffer[e.slot], std::move(produced[i]), op.inputs[i]);
      if (--s.nodes[e.node].deps == 0) ready->push(e.node);
    } else if (produced[i].defined()) {
      s.ledger.Unref(produced[i].s);
    }
    produced[i] = Grad{};
  }
  for (Grad& p : produced)
    if (p.defined()) s.ledger.Unref(p.s);
  s.Hook(&TrainingSetup::AfterBackwardNode, o);
}

/// The caller's names (`out`, `loss`), each holding one reference, once per tensor.
std::vector<TensorId> CallerNames(const Graph& g) {
  std::vector<TensorId> names;
  for (TensorId t : g.outputs)
    if (std::find(names.begin(), names.end(), t) == names.end()) names.push_back(t);
  if (g.loss != kNone && std::find(names.begin(), names.end(), g.loss) == names.end()) names.push_back(g.loss);
  return names;
}

}  // namespace

void RunBackwardPass(StepState& s) {
  const Graph& g = s.g;
  // loss.backward(), or a pipeline stage's backward from its output (StepState::backward_root).
  const TensorId loss = s.backward_root != kNone ? s.backward_root : g.loss;
  ++s.graph_task;
  const bool trainable = loss != kNone && s.rg[loss] && g.tensors[loss].producer != kNone;
  if (trainable) {
    OpId root = g.tensors[loss].producer;
    CountDependencies(s, root);
    s.ledger.set_op(root);
    // loss.backward(): the ones-like seed is held by the caller until backward returns; a given
    // grad (a stage's recv buffer) is held by its owner.
    const TensorMeta& lm = s.bound.metas[loss];
    const bool given = s.backward_seed != kNoStorage;
    StorageId seed = given ? s.backward_seed
                           : s.ledger.AllocJoined(lm.bytes(), {g.tensors[loss].name, ".grad (seed)"}, Category::kGradient);
    s.ledger.Ref(seed);
    const auto& outs = g.ops[root].outputs;
    size_t slot = std::find(outs.begin(), outs.end(), loss) - outs.begin();
    s.nodes[root].buffer[slot] = Grad{seed, *TensorMeta::Contiguous(lm.dtype, lm.sizes)};
    std::priority_queue<OpId> ready;  // the engine runs the most recently created node first
    ready.push(root);
    while (!ready.empty()) {
      OpId o = ready.top();
      ready.pop();
      RunNode(s, o, &ready);
    }
    s.ledger.set_op(kNoOp);
    if (!given) s.ledger.Unref(seed);
  }
  s.ledger.set_op(kNoOp);
  // `del out, loss`, then whatever graph is left unreached is destroyed with them; a loop
  // that keeps its names holds them until the next forward rebinds them (Note [Training loop]).
  if (!s.cfg.loop_holds_output && !s.cfg.loop_holds_step) DropCallerNames(s, /*forget=*/false);
  // The graph's nodes die (`del out, loss` drops the last references): their ctx attributes
  // with them, the last node created first (traces of bitsandbytes' MatMul8bitFp).
  for (auto n = s.nodes.rbegin(); n != s.nodes.rend(); ++n) {
    for (StorageId st : n->ctx_attributes) s.ledger.Unref(st);
    n->ctx_attributes.clear();
  }
  for (Node& n : s.nodes) {
    ReleaseSaved(s, n);
    for (Grad& gbuf : n.buffer)
      if (gbuf.defined()) s.ledger.Unref(gbuf.s);
    n.buffer.clear();
  }
  s.Hook(&TrainingSetup::AfterBackwardPass);
}

void RunGrad(StepState& s, const std::vector<OpId>& roots, GradPass* pass) {
  s.grad_pass = pass;
  ++s.graph_task;
  for (Node& n : s.nodes) {
    n.deps = 0;
    n.reachable = false;
  }
  std::fill(s.param_deps.begin(), s.param_deps.end(), 0);
  for (OpId r : roots) CountDependencies(s, r);
  std::priority_queue<OpId> ready;  // the graph root's edges: the roots no other root reaches
  for (OpId r : roots)
    if (s.nodes[r].deps == 0) ready.push(r);
  while (!ready.empty()) {
    OpId o = ready.top();
    ready.pop();
    RunNode(s, o, &ready);
  }
  s.ledger.set_op(kNoOp);
  s.Hook(&TrainingSetup::AfterGradPass);
  s.grad_pass = nullptr;
}

void DestroyNodes(StepState& s, const std::vector<OpId>& ops) {
  for (OpId o : ops) {
    Node& n = s.nodes[o];
    n.destroyed = true;
    ReleaseSaved(s, n);
    for (StorageId st : n.ctx_attributes) s.ledger.Unref(st);
    n.ctx_attributes.clear();
    for (Grad& gbuf : n.buffer)
      if (gbuf.defined()) s.ledger.Unref(gbuf.s);
    n.buffer.clear();
  }
  s.Hook(&TrainingSetup::AfterNodesDestroyed);
}

void DropCallerNames(StepState& s, bool forget) {
  for (TensorId t : CallerNames(s.g)) {
    if (!s.held[t]) continue;  // --loop-holds loss: the output died after its last use
    if (s.storage[t] != kNoStorage) s.ledger.Unref(s.storage[t]);
    if (forget) s.storage[t] = kNoStorage;
  }
}

}  // namespace memsim
