// The forward of one op: its outputs and extras allocated as its rule plans, what its autograd
// node saves, the cuBLAS workspace of a first GEMM, and the Python names dropped after their
// last use (Note [Python names], Note [Saved tensors], Note [cuBLAS workspace] in docs/op-rules.md).
#include <algorithm>

#include "lib/autodiff/state.h"
#include "lib/util/check.h"

namespace memsim {
namespace {

/// Allocates (or aliases) output |j| of op |o| into |storage|.
void AllocOutput(StepState& s, OpId o, size_t j, std::vector<StorageId>& storage) {
  const Op& op = s.g.ops[o];
  TensorId t = op.outputs[j];
  if (s.bound.owner[t] != t) {
    storage[t] = storage[s.bound.owner[t]];
    s.ledger.Ref(storage[t]);
  } else {
    storage[t] = s.ledger.Alloc(s.bound.metas[t].bytes(), s.g.tensors[t].name, Category::kActivation, op.module);
  }
}

/// Python names: an activation is dropped after its last use unless the caller holds it.
void DropDeadNames(StepState& s, OpId o) {
  const Op& op = s.g.ops[o];
  std::vector<TensorId> seen;
  std::vector<TensorId> released = op.inputs;
  released.insert(released.end(), op.keep_alive.begin(), op.keep_alive.end());
  for (TensorId t : released) {
    if (std::find(seen.begin(), seen.end(), t) != seen.end()) continue;
    seen.push_back(t);
    if (s.g.tensors[t].role == TensorRole::kActivation && s.bound.last_use[t] == o && !s.held[t])
      s.ledger.Unref(s.storage[t]);
  }
  for (TensorId t : op.outputs)
    if (s.bound.last_use[t] == kNone && !s.held[t]) s.ledger.Unref(s.storage[t]);
}

/// The storage input |i| is read from: the policy's replacement (an autocast copy) or its own.
StorageId InputStorage(const Op& op, int i, const std::vector<StorageId>& storage, const ForwardOpPolicy& policy) {
  if (static_cast<size_t>(i) < policy.input_storage.size() && policy.input_storage[i] != kNoStorage)
    return policy.input_storage[i];
  return storage[op.inputs[i]];
}

/// The node of |op| keeps what |plan| saves: inputs (or the policy's replacements), outputs, and
/// extras (|extras|, by extra index).
void KeepSaved(StepState& s, Node& node, const Op& op, const FwdPlan& plan, const std::vector<StorageId>& storage,
               const ForwardOpPolicy& policy, const std::vector<StorageId>& extras) {
  for (const SavedRef& r : plan.saved) {
    StorageId st = r.kind == SavedRef::kInput    ? InputStorage(op, r.index, storage, policy)
                   : r.kind == SavedRef::kOutput ? storage[op.outputs[r.index]]
                                                 : extras[r.index];
    MEMSIM_CHECK(st != kNoStorage);
    s.ledger.Ref(st);
    node.saved.push_back(st);
  }
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

void ExecuteForwardOp(StepState& s, OpId o, std::vector<StorageId>& storage, const ForwardOpPolicy& policy,
                      bool recompute) {
  const Op& op = s.g.ops[o];
  const OpRule& rule = RuleFor(op.kind);
  RuleCtx c = s.Ctx(o);
  Node& node = s.nodes[o];
  if (!recompute) {
    node.exists = c.rg != 0;
    node.rg = c.rg;
  }
  FwdPlan plan;
  if (rule.forward) rule.forward(c, &plan);
  if (policy.sac_cached) return RunCachedOp(s, o, storage, policy, plan);
  const bool saves = node.exists && policy.save_for_backward;

  std::vector<bool> explicit_out(op.outputs.size(), false);
  for (const auto& a : plan.actions)
    if (a.kind == FwdPlan::Action::kAllocOutput) explicit_out[a.index] = true;
  for (size_t j = 0; j < op.outputs.size(); ++j)
    if (!explicit_out[j]) AllocOutput(s, o, j, storage);
  std::vector<StorageId> extras(plan.extras.size(), kNoStorage);
  std::vector<bool> extra_live(plan.extras.size(), false);
  auto node_saves_extra = [&](int k) {
    return node.exists && std::any_of(plan.saved.begin(), plan.saved.end(), [&](const SavedRef& r) {
             return r.kind == SavedRef::kExtra && r.index == k;
           });
  };
  auto is_saved_extra = [&](int k) { return saves && node_saves_extra(k); };
  // Kept for the node now, or for a selective checkpoint's recomputation.
  auto is_kept_extra = [&](int k) { return (saves || policy.sac_cache) && node_saves_extra(k); };
  for (const auto& a : plan.actions) {
    switch (a.kind) {
      case FwdPlan::Action::kAllocOutput: AllocOutput(s, o, a.index, storage); break;
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
    }
  }
  if (node.exists) {
    if (saves) {
      KeepSaved(s, node, op, plan, storage, policy, extras);
    } else if (!recompute && policy.saved_tensor_hooks && s.profile.wrapped_number_skips_hooks) {
      // torch/csrc/autograd/saved_variable.cpp: hooks never pack a wrapped number (a 2.13 pack hook
      // never sees `h * 2.0`'s, and it stays alive), so a checkpointed mul still keeps it.
      for (const SavedRef& r : plan.saved)
        if (r.kind == SavedRef::kExtra && plan.extras[r.index].wrapped_number && extras[r.index] != kNoStorage) {
          s.ledger.Ref(extras[r.index]);
          node.unhooked.push_back(extras[r.index]);
        }
    }
    node.released.resize(node.saved.size(), false);
    if (!recompute) node.buffer.assign(op.outputs.size(), Grad{});
  }
  if (policy.sac_cache) {
    for (TensorId t : op.outputs) policy.sac_cache->push_back(storage[t]);
    if (node.exists)
      for (const SavedRef& r : plan.saved)
        if (r.kind == SavedRef::kExtra) policy.sac_cache->push_back(extras[r.index]);
    for (StorageId st : *policy.sac_cache) s.ledger.Ref(st);
  }
  for (size_t k = 0; k < extras.size(); ++k)
    if (extra_live[k]) s.ledger.Unref(extras[k]);
  // A recomputation runs inside backward, on the autograd engine's thread.
  if (rule.gemm)
    s.workspaces.OnGemm(recompute ? LibraryWorkspaces::kAutogradThread : LibraryWorkspaces::kMainThread, &s.ledger);
}

void RunForwardOp(StepState& s, OpId o) {
  s.ledger.set_op(o);
  ForwardOpPolicy policy;
  s.Hook(&TrainingSetup::BeforeForwardOp, o, &policy);
  ExecuteForwardOp(s, o, s.storage, policy, /*recompute=*/false);
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
