// The forward of one op: its outputs and extras allocated as its rule plans, what its autograd
// node saves, the cuBLAS workspace of a first GEMM, and the Python names dropped after their
// last use (Note [Python names], Note [Saved tensors], Note [cuBLAS workspace] in docs/op-rules.md).
#include <algorithm>

#include "lib/autodiff/state.h"
#include "lib/util/check.h"

namespace memsim {
namespace {

/// Allocates (or aliases) output |j| of op |o| into |storage|; |storage_bytes| > 0 sizes a
/// storage larger than the output (FwdPlan::Action::storage_bytes).
void AllocOutput(StepState& s, OpId o, size_t j, std::vector<StorageId>& storage, int64_t storage_bytes = 0) {
  const Op& op = s.g.ops[o];
  TensorId t = op.outputs[j];
  if (s.bound.owner[t] != t) {
    storage[t] = storage[s.bound.owner[t]];
    s.ledger.Ref(storage[t]);
  } else {
    storage[t] = s.ledger.Alloc(std::max(storage_bytes, s.bound.metas[t].bytes()), s.g.tensors[t].name,
                                Category::kActivation, op.module);
  }
}

/// The producer node of tensor |t| when it exists (a parameter or an input has none).
Node* ProducerNode(StepState& s, TensorId t) {
  OpId p = s.g.tensors[t].producer;
  return p != kNone && s.nodes[p].exists ? &s.nodes[p] : nullptr;
}

/// Note [Dead graphs]: a node that no later node points to and whose outputs have lost their
/// names is destroyed in forward (shared_ptr refcounts), its saved tensors with it, and so are
/// the nodes it alone pointed to.
void DestroyIfDead(StepState& s, OpId o) {
  Node& node = s.nodes[o];
  if (!node.exists || node.edges > 0 || node.names > 0 || node.reachable) return;
  node.exists = false;
  node.died = true;
  for (size_t k = 0; k < node.saved.size(); ++k)
    if (!node.released[k]) s.ledger.Unref(node.saved[k]);
  node.saved.clear();
  for (StorageId st : node.unhooked) s.ledger.Unref(st);
  node.unhooked.clear();
  for (StorageId st : node.ctx_attributes) s.ledger.Unref(st);
  node.ctx_attributes.clear();
  const Op& op = s.g.ops[o];
  for (size_t i = 0; i < op.inputs.size(); ++i)
    if (node.rg.test(i))
      if (Node* p = ProducerNode(s, op.inputs[i]); p && --p->edges == 0)
        DestroyIfDead(s, s.g.tensors[op.inputs[i]].producer);
}

/// The node of op |o| was just made: it points to its rg inputs' nodes; its outputs are named.
void CountNodeRefs(StepState& s, OpId o) {
  Node& node = s.nodes[o];
  if (!node.exists) return;
  const Op& op = s.g.ops[o];
  node.names = static_cast<int>(op.outputs.size());
  for (size_t i = 0; i < op.inputs.size(); ++i)
    if (node.rg.test(i))
      if (Node* p = ProducerNode(s, op.inputs[i])) ++p->edges;
}

/// Python names: an activation is dropped after its last use unless the caller holds it. A
/// node left with no names and no later node is destroyed as its last name goes, before that
/// name's storage (Note [Dead graphs]).
void DropDeadNames(StepState& s, OpId o) {
  const Op& op = s.g.ops[o];
  std::vector<TensorId> seen, dropped;
  std::vector<TensorId> released = op.inputs;
  released.insert(released.end(), op.keep_alive.begin(), op.keep_alive.end());
  for (TensorId t : released) {
    if (std::find(seen.begin(), seen.end(), t) != seen.end()) continue;
    seen.push_back(t);
    // (A pipeline stage's ops may keep alive a tensor of an earlier stage: no storage here.)
    if (s.g.tensors[t].role == TensorRole::kActivation && s.bound.last_use[t] == o && !s.held[t] &&
        s.storage[t] != kNoStorage)
      dropped.push_back(t);
  }
  for (TensorId t : op.outputs)
    if (s.bound.last_use[t] == kNone && !s.held[t]) dropped.push_back(t);
  for (TensorId t : dropped) {  // the tensor's autograd meta (its grad_fn) goes before its storage
    if (Node* p = ProducerNode(s, t); p && --p->names == 0) DestroyIfDead(s, s.g.tensors[t].producer);
    s.ledger.Unref(s.storage[t]);
  }
}

/// The storage input |i| is read from: the policy's replacement (an autocast copy) or its own.
StorageId InputStorage(const Op& op, int i, const std::vector<StorageId>& storage, const ForwardOpPolicy& policy) {
  if (static_cast<size_t>(i) < policy.input_storage.size() && policy.input_storage[i] != kNoStorage)
    return policy.input_storage[i];
  return storage[op.inputs[i]];
}

/// The storage saved reference |r| of |op| names.
StorageId SavedStorage(const Op& op, const SavedRef& r, const std::vector<StorageId>& storage,
                       const ForwardOpPolicy& policy, const std::vector<StorageId>& extras) {
  return r.kind == SavedRef::kInput    ? InputStorage(op, r.index, storage, policy)
         : r.kind == SavedRef::kOutput ? storage[op.outputs[r.index]]
                                       : extras[r.index];
}

/// copy_same_type_transpose_ (aten/src/ATen/native/Copy.cpp): a CPU copy of a transposed 2-D
/// tensor of at least 60·60 elements (of |elem| bytes each) into a contiguous one goes through a
/// 60×60 block buffer (120×120 for bytes).
int64_t CpuTransposeCopyBuffer(int64_t numel, int64_t elem) {
  if (numel < 60 * 60) return 0;
  return elem == 1 ? 120 * 120 : 60 * 60 * elem;
}

/// The tensor saved by |r| when it is the graph's tensor itself (not a view the op makes, an
/// extra or an autocast copy): its id, else kNone.
TensorId OwnSavedTensor(const StepState& s, const Op& op, const SavedRef& r, StorageId st) {
  const TensorId t = r.kind == SavedRef::kInput ? op.inputs[r.index] : r.kind == SavedRef::kOutput ? op.outputs[r.index] : kNone;
  return t != kNone && s.storage[t] == st ? t : kNone;
}

/// The bytes the pack hook copies of the tensor saved by |r|: a tensor of the graph at its own
/// (view's) size; an extra or an autocast copy whole.
int64_t SavedBytes(const StepState& s, const Op& op, const SavedRef& r, StorageId st) {
  const TensorId t = OwnSavedTensor(s, op, r, st);
  return t != kNone ? s.bound.metas[t].bytes() : s.ledger.bytes(st);
}

/// Whether the pack hook takes the tensor saved by |r| (stored in |st|): saved_variable.cpp never
/// packs a wrapped number (`h * 2.0`'s scalar, 2.x) nor a ctx attribute (no SavedVariable); a
/// PackFilter leaves small tensors and the parameters themselves (torchtune's OffloadActivations:
/// `isinstance(activation, nn.Parameter)`, a buffer likewise; Wᵀ is a view, a plain Tensor).
bool PackTakes(const StepState& s, const Op& op, const FwdPlan& plan, const SavedRef& r, StorageId st,
               const ForwardOpPolicy& policy) {
  if (r.kind == SavedRef::kExtra && plan.extras[r.index].wrapped_number && s.profile.wrapped_number_skips_hooks)
    return false;
  if (r.ctx_attribute) return false;
  const ForwardOpPolicy::PackFilter* f = policy.pack_filter;
  if (f == nullptr) return true;
  const int64_t bytes = st != kNoStorage ? SavedBytes(s, op, r, st) : plan.extras[r.index].bytes;
  if (bytes < f->min_bytes) return false;
  const TensorId t = st != kNoStorage ? OwnSavedTensor(s, op, r, st) : kNone;
  if (f->skip_parameters && t != kNone && !r.transposed &&
      (s.g.tensors[t].role == TensorRole::kParameter || s.g.tensors[t].role == TensorRole::kBuffer))
    return false;
  return true;
}

/// CachingHostAllocator (aten/src/ATen/core/CachingHostAllocator.h): a pinned request is rounded
/// up to a power of two (c10::llvm::PowerOf2Ceil) before the block is allocated.
int64_t PinnedHostBlock(int64_t bytes) {
  int64_t block = 1;
  while (block < bytes) block <<= 1;
  return block;
}

/// The pack hook on the tensor saved by |r| (Note [Activation offloading]): the storage the node
/// keeps instead of it, already referenced once.
StorageId PackSaved(StepState& s, const Op& op, const SavedRef& r, StorageId st, const ForwardOpPolicy& policy) {
  using Pack = ForwardOpPolicy::Pack;
  const TensorId t = OwnSavedTensor(s, op, r, st);
  const int64_t bytes = SavedBytes(s, op, r, st);
  // save_on_cpu makes a contiguous copy (torch.empty(size)); torchtune's torch.empty_like keeps
  // the source's strides
  const bool contiguous = policy.pack_filter == nullptr || !policy.pack_filter->keeps_strides;
  if (policy.pack == Pack::kCopy) {  // a new CPU tensor and copy_(tensor), on the CPU
    StorageId copy = s.ledger.AllocJoined(bytes, {op.name, ":saved (packed)"}, Category::kActivation, op.module);
    if (contiguous && r.transposed && t != kNone) {  // the saved tensor may be an autocast copy of another dtype
      const int64_t numel = s.bound.metas[t].numel();
      const int64_t buffer = CpuTransposeCopyBuffer(numel, numel > 0 ? bytes / numel : 0);
      if (buffer > 0)
        s.ledger.Unref(s.ledger.AllocJoined(buffer, {op.name, ":transpose copy block"}, Category::kTemporary, op.module));
    }
    return copy;
  }
  const bool pinned = policy.pack == Pack::kHostPinned;
  StorageId host = s.ledger.AllocHost(bytes, s.ledger.record_names() ? op.name + ":saved (on host)" : std::string(),
                                      pinned ? PinnedHostBlock(bytes) : bytes);
  // Into a contiguous pinned tensor, a transposed source is made contiguous on the device first
  // (Copy.cu, copy_requires_temporaries); .cpu() keeps its strides and needs none.
  if (pinned && contiguous && r.transposed)
    s.ledger.Unref(s.ledger.AllocJoined(bytes, {op.name, ":contiguous copy for the host"}, Category::kTemporary, op.module));
  return host;
}

/// The node of |op| keeps what |plan| saves: inputs (or the policy's replacements), outputs, and
/// extras (|extras|, by extra index); |packed|: per saved reference, the storage its pack hook
/// made (kNoStorage: the tensor itself is kept).
void KeepSaved(StepState& s, Node& node, const Op& op, const FwdPlan& plan, const std::vector<StorageId>& storage,
               const ForwardOpPolicy& policy, const std::vector<StorageId>& extras,
               const std::vector<StorageId>& packed = {}) {
  for (size_t k = 0; k < plan.saved.size(); ++k) {
    if (plan.saved[k].ctx_attribute) continue;  // KeepCtxAttributes
    if (k < packed.size() && packed[k] != kNoStorage) {
      node.saved.push_back(packed[k]);
      continue;
    }
    StorageId st = SavedStorage(op, plan.saved[k], storage, policy, extras);
    MEMSIM_CHECK(st != kNoStorage);
    s.ledger.Ref(st);
    node.saved.push_back(st);
  }
}

/// The pack hook runs as each tensor is saved: at |point| of the plan, the saved references
/// whose SavedRef::pack_after is |point|; kBeforeKernel: inputs saved before the kernel,
/// kAfterKernel: outputs and extras saved after it.
constexpr int kBeforeKernel = -1, kAfterKernel = -2;
void PackSavedRefs(StepState& s, const Op& op, const FwdPlan& plan, const std::vector<StorageId>& storage,
                   const ForwardOpPolicy& policy, const std::vector<StorageId>& extras, int point,
                   std::vector<StorageId>* packed) {
  if (packed->empty()) return;
  for (size_t k = 0; k < plan.saved.size(); ++k) {
    const SavedRef& r = plan.saved[k];
    const int at = r.pack_after >= 0 ? r.pack_after : r.kind == SavedRef::kInput ? kBeforeKernel : kAfterKernel;
    if (at != point) continue;
    if (r.kind == SavedRef::kExtra && plan.extras[r.index].wrapped_number && s.profile.wrapped_number_skips_hooks)
      continue;  // the hook never sees it
    if (r.ctx_attribute) continue;
    const StorageId st = SavedStorage(op, r, storage, policy, extras);
    if (PackTakes(s, op, plan, r, st, policy)) (*packed)[k] = PackSaved(s, op, r, st, policy);
    if (policy.pack_filter && policy.pack_filter->on_pack) policy.pack_filter->on_pack(st, (*packed)[k]);
  }
}

/// torch/csrc/autograd/saved_variable.cpp: saved-tensor hooks never pack a wrapped number (a 2.13
/// pack hook never sees `h * 2.0`'s, and it stays alive), so a node whose saving the hooks took
/// over (a checkpointed mul) still keeps it.
void KeepUnhookedWrappedNumbers(StepState& s, Node& node, const FwdPlan& plan, const std::vector<StorageId>& extras) {
  for (const SavedRef& r : plan.saved)
    if (r.kind == SavedRef::kExtra && plan.extras[r.index].wrapped_number && extras[r.index] != kNoStorage) {
      s.ledger.Ref(extras[r.index]);
      node.unhooked.push_back(extras[r.index]);
    }
}

/// A Function's ctx attributes (`ctx.A = A`, SavedRef::ctx_attribute): no saved-tensor hook sees
/// them (checkpointing keeps them too) and release_variables leaves them; the node holds them
/// until the graph is destroyed. A recomputation's node dies with its recomputed graph.
void KeepCtxAttributes(StepState& s, Node& node, const Op& op, const FwdPlan& plan,
                       const std::vector<StorageId>& storage, const std::vector<StorageId>& extras) {
  for (const SavedRef& r : plan.saved) {
    if (!r.ctx_attribute) continue;
    // an input (`ctx.A = A`) or a buffer the Function made (`ctx.scale = input.new()`)
    const StorageId st = r.kind == SavedRef::kInput   ? storage[op.inputs[r.index]]
                         : r.kind == SavedRef::kExtra ? extras[r.index]
                                                      : kNoStorage;
    if (st == kNoStorage) continue;
    s.ledger.Ref(st);
    node.ctx_attributes.push_back(st);
  }
}

/// Selective checkpointing's forward of a cached op: its outputs, then the extras its node would
/// save, referenced into |cache| for the recomputation (RunCachedOp reads them in that order).
void CacheForRecompute(StepState& s, const Node& node, const Op& op, const FwdPlan& plan,
                       const std::vector<StorageId>& storage, const std::vector<StorageId>& extras,
                       std::vector<StorageId>* cache) {
  for (TensorId t : op.outputs) cache->push_back(storage[t]);
  if (node.exists)
    for (const SavedRef& r : plan.saved)
      if (r.kind == SavedRef::kExtra) cache->push_back(extras[r.index]);
  for (StorageId st : *cache) s.ledger.Ref(st);
}

/// Selective checkpointing's recomputation of a cached op: its outputs and saved extras are the
/// ones the forward kept (|cached|: outputs, then saved extras in the node's order); nothing runs.
void RunCachedOp(StepState& s, OpId o, std::vector<StorageId>& storage, const ForwardOpPolicy& policy,
                 const FwdPlan& plan) {
  const Op& op = s.g.ops[o];
  const std::vector<StorageId>& cached = *policy.sac_cached;
  for (size_t j = 0; j < op.outputs.size(); ++j) {
    storage[op.outputs[j]] = cached[j];
    s.ledger.Ref(cached[j]);
  }
  Node& node = s.nodes[o];
  if (!node.exists) return;
  std::vector<StorageId> extras(plan.extras.size(), kNoStorage);
  size_t next = op.outputs.size();
  for (const SavedRef& r : plan.saved)
    if (r.kind == SavedRef::kExtra) extras[r.index] = cached[next++];
  KeepSaved(s, node, op, plan, storage, policy, extras);
  node.released.resize(node.saved.size(), false);
}

}  // namespace

/// wait_tensor: an op reading a collective's output first waits for its work, which lets go of what
/// it held (FwdPlan::HoldUntilUse).
void WaitPending(StepState& s, const Op& op) {
  std::erase_if(s.pending_waits, [&](const std::pair<TensorId, StorageId>& w) {
    if (std::find(op.inputs.begin(), op.inputs.end(), w.first) == op.inputs.end()) return false;
    s.ledger.Unref(w.second);
    return true;
  });
}

void FlushPendingWaits(StepState& s) {
  for (const auto& w : s.pending_waits) s.ledger.Unref(w.second);
  s.pending_waits.clear();
}

void ExecuteForwardOp(StepState& s, OpId o, std::vector<StorageId>& storage, const ForwardOpPolicy& policy,
                      bool recompute) {
  const Op& op = s.g.ops[o];
  const OpRule& rule = RuleFor(op.kind);
  RuleCtx c = s.Ctx(o);
  Node& node = s.nodes[o];
  if (!recompute) {
    node.exists = c.rg.any();
    node.rg = c.rg;
    node.destroyed = false;
  }
  FwdPlan plan;
  if (rule.forward) rule.forward(c, &plan);
  WaitPending(s, op);
  if (policy.sac_cached) return RunCachedOp(s, o, storage, policy, plan);
  if (policy.stops_before_kernel) {  // the pack hook raised: the node holds its inputs alone
    if (node.exists && policy.save_for_backward)
      KeepSaved(s, node, op, plan, storage, policy, std::vector<StorageId>(plan.extras.size(), kNoStorage));
    node.released.resize(node.saved.size(), false);
    return;
  }
  const bool saves = node.exists && policy.save_for_backward;
  const bool pack = saves && policy.pack != ForwardOpPolicy::Pack::kNone;
  std::vector<StorageId> packed(pack ? plan.saved.size() : 0, kNoStorage);
  PackSavedRefs(s, op, plan, storage, policy, {}, kBeforeKernel, &packed);

  std::vector<bool> explicit_out(op.outputs.size(), false);
  for (const auto& a : plan.actions)
    if (a.kind == FwdPlan::Action::kAllocOutput) explicit_out[a.index] = true;
  for (size_t j = 0; j < op.outputs.size(); ++j)
    if (!explicit_out[j]) AllocOutput(s, o, j, storage);
  std::vector<StorageId> extras(plan.extras.size(), kNoStorage);
  std::vector<bool> extra_live(plan.extras.size(), false);
  PackSavedRefs(s, op, plan, storage, policy, extras, 0, &packed);
  auto node_saves_extra = [&](int k) {
    return node.exists && std::any_of(plan.saved.begin(), plan.saved.end(), [&](const SavedRef& r) {
             return r.kind == SavedRef::kExtra && r.index == k;
           });
  };
  auto is_saved_extra = [&](int k) { return saves && node_saves_extra(k); };
  // Kept for the node now, or for a selective checkpoint's recomputation.
  // (A packed extra is not: the node keeps its packed copy.)
  auto packed_extra = [&](int k) {
    return pack && std::any_of(plan.saved.begin(), plan.saved.end(), [&](const SavedRef& r) {
             return r.kind == SavedRef::kExtra && r.index == k && PackTakes(s, op, plan, r, kNoStorage, policy);
           });
  };
  auto is_kept_extra = [&](int k) { return ((saves && !packed_extra(k)) || policy.sac_cache) && node_saves_extra(k); };
  for (size_t i = 0; i < plan.actions.size(); ++i) {
    const FwdPlan::Action& a = plan.actions[i];
    switch (a.kind) {
      case FwdPlan::Action::kAllocOutput: AllocOutput(s, o, a.index, storage, a.storage_bytes); break;
      case FwdPlan::Action::kAllocExtra:
        extras[a.index] = s.ledger.AllocJoined(plan.extras[a.index].bytes, {op.name, ":", plan.extras[a.index].label},
                                         is_saved_extra(a.index) ? Category::kActivation : Category::kTemporary, op.module);
        extra_live[a.index] = true;
        break;
      case FwdPlan::Action::kFreeExtra:
        s.ledger.Unref(extras[a.index]);
        extra_live[a.index] = false;
        break;
      case FwdPlan::Action::kReleaseUnsaved:
        if (extra_live[a.index] && !is_kept_extra(a.index)) {
          s.ledger.Unref(extras[a.index]);
          extra_live[a.index] = false;
        }
        break;
      case FwdPlan::Action::kHoldUntilUse:
        if (extra_live[a.index] && !recompute) {
          s.pending_waits.push_back({op.outputs[0], extras[a.index]});
          extra_live[a.index] = false;
        }
        break;
    }
    PackSavedRefs(s, op, plan, storage, policy, extras, static_cast<int>(i) + 1, &packed);
  }
  if (node.exists) {
    if (saves) {
      PackSavedRefs(s, op, plan, storage, policy, extras, kAfterKernel, &packed);
      KeepSaved(s, node, op, plan, storage, policy, extras, packed);
    } else if (!recompute && policy.saved_tensor_hooks && s.profile.wrapped_number_skips_hooks) {
      KeepUnhookedWrappedNumbers(s, node, plan, extras);
    }
    if (!recompute) KeepCtxAttributes(s, node, op, plan, storage, extras);
    node.released.resize(node.saved.size(), false);
    if (!recompute) node.buffer.assign(op.outputs.size(), Grad{});
  }
  if (policy.sac_cache) CacheForRecompute(s, node, op, plan, storage, extras, policy.sac_cache);
  for (size_t k = 0; k < extras.size(); ++k)
    if (extra_live[k]) s.ledger.Unref(extras[k]);
  // A recomputation runs inside backward, on the autograd engine's thread.
  if (rule.gemm)
    s.workspaces.OnGemm(recompute ? LibraryWorkspaces::kAutogradThread : LibraryWorkspaces::kMainThread, &s.ledger,
                        IsLtGemm(op));
}

void DropNames(StepState& s, const std::vector<TensorId>& ts) {
  for (TensorId t : ts) {
    if (Node* p = ProducerNode(s, t); p && --p->names == 0) DestroyIfDead(s, s.g.tensors[t].producer);
    s.ledger.Unref(s.storage[t]);
  }
}

void RunForwardOp(StepState& s, OpId o) {
  s.ledger.set_op(o);
  ForwardOpPolicy policy;
  s.Hook(&TrainingSetup::BeforeForwardOp, o, &policy);
  ExecuteForwardOp(s, o, s.storage, policy, /*recompute=*/false);
  CountNodeRefs(s, o);
  // The op's own temporaries (autocast copies) die as it returns, before Python drops names.
  s.Hook(&TrainingSetup::AfterForwardOp, o);
  DropDeadNames(s, o);
  // `out = model(x)` / `loss = ...` rebind the loop's names: the previous pass's die.
  for (TensorId t : s.g.ops[o].outputs)
    if (s.held_prev[t] != kNoStorage) {
      s.ledger.Unref(s.held_prev[t]);
      s.held_prev[t] = kNoStorage;
    }
}

}  // namespace memsim
