// Activation checkpointing, torch.utils.checkpoint, on the modules named in
// SetupOptions::checkpoint_modules (Note [Activation checkpointing] in docs/op-rules.md).
// Non-reentrant (use_reentrant=False):
// - forward: every op of a checkpointed module runs as usual, but its node keeps nothing (the
//   saved-tensor hooks pack a holder, not the tensor); the checkpoint keeps the module's inputs
//   (its `args`: tensors made outside the module) alive instead;
// - backward: when the first node of the module that needs a saved tensor runs, the module's
//   forward is recomputed (its allocations on the timeline in the backward phase, GEMMs on the
//   autograd thread); what each recomputed op would save is handed to the original node, which
//   keeps it until its own backward has run; the recomputed outputs die as the recomputation's
//   Python names do; the inputs are let go when the module's last node has run. Under autocast
//   the recomputation runs in the forward's autocast state: setups see each recomputed op
//   (BeforeRecomputeOp) and the region's exit (AfterRecompute), Note [Autocast].
// Reentrant (use_reentrant=True, CheckpointFunction) differs only where CheckpointRule says: the
// module is one node of the outer graph, so the recomputation runs before any of its nodes; the
// nested backward's Python frame holds the incoming grads and the recomputed outputs until it
// returns; the forward RNG state is a ctx attribute, freed with the graph.
#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "lib/autodiff/setups/sac.h"
#include "lib/autodiff/setups/setups.h"
#include "lib/autodiff/state.h"

namespace memsim {
namespace {

bool Within(const std::string& module, const std::string& root) {
  return module == root || (module.size() > root.size() && module.compare(0, root.size(), root) == 0 &&
                            module[root.size()] == '.');
}

/// What an implementation holds in backward (Note [Activation checkpointing]).
struct CheckpointRule {
  /// The recomputation runs before the module's first backward node (reentrant: the module is
  /// one CheckpointFunction node), not at the first node that unpacks a saved tensor.
  bool recompute_before_first_node;
  /// The grads coming into the module and its recomputed outputs stay alive until the module's
  /// last node has run (CheckpointFunction.backward's `args` and `outputs`).
  bool hold_grads_and_outputs;
  /// The forward's RNG state lives until the autograd graph is destroyed (`ctx.fwd_cpu_state`),
  /// not until the module's last node has run.
  bool rng_state_lives_with_graph;
  /// The forward's nodes save through saved-tensor hooks (non-reentrant); reentrant runs the
  /// forward under no_grad, with no nodes.
  bool saved_tensor_hooks;
};

CheckpointRule RuleOf(CheckpointImpl impl) {
  switch (impl) {
    case CheckpointImpl::kReentrant: return {true, true, true, false};
    case CheckpointImpl::kNonReentrant: break;
  }
  return {false, false, false, true};
}

class Checkpoint : public TrainingSetup {
 public:
  Checkpoint(std::vector<std::string> modules, CheckpointImpl impl, SacPolicy sac)
      : modules_(std::move(modules)), rule_(RuleOf(impl)), sac_(std::move(sac)) {}

  void OnSetup(StepState& s) override {
    region_.assign(s.g.ops.size(), -1);
    regions_.clear();
    for (OpId o = 0; o < s.g.ops.size(); ++o) {
      const std::string& m = s.g.ops[o].module;
      // The outermost checkpointed module holding the op; a new region each time it is entered.
      std::string root;
      for (const std::string& c : modules_)
        if (Within(m, c) && (root.empty() || c.size() < root.size())) root = c;
      if (root.empty()) continue;
      if (o == 0 || region_[o - 1] < 0 || regions_[region_[o - 1]].root != root) {
        Region r;
        r.root = root;
        r.first = r.last = o;
        regions_.push_back(std::move(r));
      }
      region_[o] = static_cast<int>(regions_.size()) - 1;
      regions_.back().last = o;
    }
    MergeSharedModuleCalls();
    for (Region& r : regions_) r.args = Args(s, r);
    SelectCachedOps(s);
    // What each region returns: the tensors it makes that an op outside it reads, or the caller.
    auto returned = [&](TensorId t) {
      OpId p = s.g.tensors[t].producer;
      if (p == kNone || region_[p] < 0) return;
      std::vector<TensorId>& outs = regions_[region_[p]].outputs;
      if (std::find(outs.begin(), outs.end(), t) == outs.end()) outs.push_back(t);
    };
    for (OpId o = 0; o < s.g.ops.size(); ++o)
      for (TensorId t : s.g.ops[o].inputs)
        if (OpId p = s.g.tensors[t].producer; p != kNone && region_[p] >= 0 && region_[p] != region_[o]) returned(t);
    for (TensorId t : s.g.outputs) returned(t);
    if (s.g.loss != kNone) returned(s.g.loss);
    fresh_ = regions_;
  }

  void BeforeForwardOp(StepState& s, OpId o, ForwardOpPolicy* policy) override {
    if (region_[o] < 0) return;
    Enter(s);
    policy->save_for_backward = false;
    policy->saved_tensor_hooks = rule_.saved_tensor_hooks;
    Region& r = regions_[region_[o]];
    if (sac_save_[o]) policy->sac_cache = &r.sac_cache[o - r.first];
    if (o != r.first) return;
    r.entered = true;
    // The checkpoint's closure holds the CPU RNG state taken at the call, and the call's args.
    r.rng_state = RngState(s, "checkpoint: forward RNG state");
    for (TensorId t : r.args) s.ledger.Ref(s.storage[t]);
  }

  void BeforeBackwardNode(StepState& s, OpId o) override {
    if (region_[o] < 0) return;
    Enter(s);
    Region& r = regions_[region_[o]];
    if (!r.counted) {
      r.counted = true;
      r.done.assign(r.last - r.first + 1, false);
      r.saves.assign(r.last - r.first + 1, false);
      for (OpId k = r.first; k <= r.last; ++k) {
        r.pending += s.nodes[k].exists && s.nodes[k].reachable;
        if (s.grad_pass == nullptr) continue;
        r.saves[k - r.first] = Saves(s, k);
        r.holders += r.saves[k - r.first] && !s.nodes[k].destroyed;
      }
    }
    // Once per graph task (unpack_hook's frame.is_recomputed[gid]).
    if (r.task != s.graph_task && (rule_.recompute_before_first_node || NeedsSaved(s, o))) {
      if (rule_.hold_grads_and_outputs) HoldIncomingGrads(s, r);
      Recompute(s, r);
    }
  }

  void AfterBackwardNode(StepState& s, OpId o) override {
    if (region_[o] < 0) return;
    Enter(s);
    Region& r = regions_[region_[o]];
    if (s.grad_pass == nullptr) {
      if (--r.pending == 0) Release(s, r);
      return;
    }
    // A split backward: a pass that retains the graph pops the copy the node unpacked (its
    // holder's handle for this task), the holder stays; one that does not frees the holders.
    Node& node = s.nodes[o];
    if (s.grad_pass->retain) {
      for (size_t k = 0; k < node.saved.size(); ++k)
        if (!node.released[k]) s.ledger.Unref(node.saved[k]);
      node.saved.clear();
      node.released.clear();
    } else {
      HolderGone(s, r, o);
    }
  }

  /// A split backward's DestroyNodes: the destroyed nodes' holders are gone.
  void AfterNodesDestroyed(StepState& s) override {
    Enter(s);
    for (Region& r : regions_)
      for (OpId o = r.first; r.counted && o <= r.last; ++o)
        if (s.nodes[o].destroyed) HolderGone(s, r, o);
  }

  void AfterBackwardPass(StepState& s) override {
    Enter(s);
    for (Region& r : regions_) {
      Release(s, r);
      DropCache(s, r);
      if (r.rng_state) s.ledger.Unref(*r.rng_state);  // the graph is destroyed
      r.rng_state.reset();
      r.counted = r.entered = false;
      r.released = false;
      r.task = 0;
      r.pending = r.holders = 0;
    }
  }

 private:
  struct Region {
    std::string root;
    OpId first, last;
    std::vector<TensorId> args;  ///< tensors made outside the region that its ops read
    std::vector<TensorId> outputs;  ///< tensors made inside the region that are read outside it
    std::vector<StorageId> held;    ///< CheckpointRule::hold_grads_and_outputs, until Release
    std::optional<StorageId> rng_state;
    bool entered = false;  ///< its forward ran in this pass (a pipeline stage runs its own regions only)
    uint64_t task = 0;  ///< the graph task it was recomputed in (0: none)
    bool counted = false, released = false;
    int pending = 0;             ///< region nodes still to run in backward
    /// A split backward: the frame (and with it the args) lives while a node keeps its holders:
    /// the region's saving nodes not yet run without retain_graph nor destroyed (|done|: per op).
    int holders = 0;
    std::vector<bool> done;
    std::vector<bool> saves;  ///< per op: its node packs through the hooks (Saves), a split backward's count
    /// Per op of the region: what selective checkpointing keeps from the forward until the
    /// recomputation takes it (Note [Selective activation checkpointing]).
    std::vector<std::vector<StorageId>> sac_cache;
  };

  /// Which ops the SAC policy caches: it decides per ATen op and per call of that op within each
  /// call of the checkpointed module (policies count per checkpointed call, as torchtitan's does).
  void SelectCachedOps(StepState& s) {
    sac_save_.assign(s.g.ops.size(), false);
    std::map<std::string, size_t> module_calls;
    for (Region& r : regions_) {
      r.sac_cache.assign(r.last - r.first + 1, {});
      if (!sac_.enabled()) continue;
      const size_t call = module_calls[r.root]++;
      std::map<std::string, size_t> occurrences;
      for (OpId o = r.first; o <= r.last; ++o) {
        const std::string aten = AtenOpOf(s.Ctx(o));
        if (!aten.empty()) sac_save_[o] = sac_.Saves(r.root, call, aten, occurrences[aten]++);
      }
    }
  }

  /// Drops what the recomputation did not take (a region whose backward never ran).
  static void DropCache(StepState& s, Region& r) {
    for (std::vector<StorageId>& c : r.sac_cache) {
      for (StorageId st : c) s.ledger.Unref(st);
      c.clear();
    }
  }

  /// A checkpointed module that calls a shared module registered elsewhere (cs336's one RoPE
  /// module, `positional_encoder`, called by every layer's attention): the graph names those
  /// ops after the shared module, but they run inside the checkpointed call. Two regions of
  /// the same root with only unchecked ops between them are one call (Note [Activation
  /// checkpointing]).
  void MergeSharedModuleCalls() {
    std::vector<Region> merged;
    for (Region& r : regions_) {
      if (!merged.empty() && merged.back().root == r.root) {
        Region& m = merged.back();
        bool unchecked = true;
        for (OpId o = m.last + 1; o < r.first; ++o) unchecked &= region_[o] < 0;
        if (unchecked) {
          m.last = r.last;
          continue;
        }
      }
      merged.push_back(std::move(r));
    }
    regions_ = std::move(merged);
    std::fill(region_.begin(), region_.end(), -1);
    for (size_t i = 0; i < regions_.size(); ++i)
      for (OpId o = regions_[i].first; o <= regions_[i].last; ++o) region_[o] = static_cast<int>(i);
  }

  static std::vector<TensorId> Args(const StepState& s, const Region& r) {
    std::vector<TensorId> args;
    for (OpId o = r.first; o <= r.last; ++o)
      for (TensorId t : s.g.ops[o].inputs) {
        const Tensor& tensor = s.g.tensors[t];
        bool outside = tensor.role == TensorRole::kInput ||
                       (tensor.role == TensorRole::kActivation && (tensor.producer < r.first || tensor.producer > r.last));
        if (outside && std::find(args.begin(), args.end(), t) == args.end()) args.push_back(t);
      }
    return args;
  }

  /// Whether node |o|'s backward unpacks a saved tensor (what triggers the recomputation).
  static bool NeedsSaved(const StepState& s, OpId o) { return Saves(s, o); }

  /// The grads already in the InputBuffers of the region's outputs (the nested backward's `args`).
  static void HoldIncomingGrads(StepState& s, Region& r) {
    for (OpId o = r.first; o <= r.last; ++o) {
      const auto& outs = s.g.ops[o].outputs;
      for (size_t j = 0; j < outs.size() && j < s.nodes[o].buffer.size(); ++j) {
        const Grad& g = s.nodes[o].buffer[j];
        if (!g.defined() || std::find(r.outputs.begin(), r.outputs.end(), outs[j]) == r.outputs.end()) continue;
        s.ledger.Ref(g.s);
        r.held.push_back(g.s);
      }
    }
  }

  /// Whether op |o|'s node keeps a tensor through the saved-tensor hooks (what the pack hook
  /// counts, and what unpacking in backward recomputes): not a wrapped number that skips them
  /// (Profile::wrapped_number_skips_hooks, e.g. `h * 2.0`'s MulBackward0), nor a ctx attribute.
  static bool Saves(const StepState& s, OpId o) {
    const OpRule& rule = RuleFor(s.g.ops[o].kind);
    if (!s.nodes[o].exists || !rule.forward) return false;
    FwdPlan plan;
    rule.forward(s.Ctx(o), &plan);
    return std::any_of(plan.saved.begin(), plan.saved.end(), [&](const SavedRef& r) {
      if (r.ctx_attribute) return false;
      return !(r.kind == SavedRef::kExtra && plan.extras[r.index].wrapped_number && s.profile.wrapped_number_skips_hooks);
    });
  }

  /// The recomputation's last op: with early stop (2.x non-reentrant, Note [Activation
  /// checkpointing]) the last op whose node saves a tensor, since the pack hook raises
  /// _StopRecomputationError once every saved tensor is recomputed; else the region's last op.
  OpId StopAt(StepState& s, const Region& r) const {
    if (!s.profile.checkpoint_early_stop || rule_.hold_grads_and_outputs) return r.last;
    for (OpId o = r.last; o > r.first; --o)
      if (Saves(s, o)) return o;
    return r.first;
  }

  /// Whether the early stop raises before |o|'s kernel runs: every tensor its node packs is an
  /// input, which autograd packs before calling the kernel (an output or a kernel-made extra is
  /// packed after it, and a composite that saves between its kernels part-way: both run).
  bool StopsBeforeKernel(StepState& s, OpId o) const {
    FwdPlan plan;
    RuleFor(s.g.ops[o].kind).forward(s.Ctx(o), &plan);
    return std::all_of(plan.saved.begin(), plan.saved.end(), [&](const SavedRef& r) {
      if (r.ctx_attribute) return true;
      if (r.kind == SavedRef::kExtra && plan.extras[r.index].wrapped_number && s.profile.wrapped_number_skips_hooks) return true;
      return r.kind == SavedRef::kInput && r.pack_after < 0;
    });
  }

  /// Node |o| of |r| let its holders go (a split backward): the last one frees the frame.
  void HolderGone(StepState& s, Region& r, OpId o) {
    if (r.done.empty() || r.done[o - r.first] || !r.saves[o - r.first]) return;
    r.done[o - r.first] = true;
    if (--r.holders > 0) return;
    Release(s, r);
    r = fresh_[&r - regions_.data()];  // the graph task's frame is gone; the next forward makes a new one
  }

  /// A later graph task's recomputation (a split backward's W after its I): what each node kept
  /// from an earlier task stays with its holders (Node::earlier_tasks); a destroyed node's
  /// holders are gone, so it keeps nothing new.
  static void ParkEarlierTasks(StepState& s, const Region& r) {
    for (OpId o = r.first; o <= r.last; ++o) {
      Node& node = s.nodes[o];
      for (size_t k = 0; k < node.saved.size(); ++k)
        if (!node.released[k]) node.earlier_tasks.push_back(node.saved[k]);
      node.saved.clear();
      node.released.clear();
    }
  }

  void Recompute(StepState& s, Region& r) {
    if (s.grad_pass != nullptr) ParkEarlierTasks(s, r);
    r.task = s.graph_task;
    const OpId stop = StopAt(s, r);
    const bool early = s.profile.checkpoint_early_stop && !rule_.hold_grads_and_outputs && Saves(s, stop);
    const bool before_kernel = early && StopsBeforeKernel(s, stop);
    const uint32_t op = s.ledger.op();
    std::vector<StorageId> storage = s.storage;  // args and parameters as the region sees them
    // The recomputation's Python names: each tensor it makes dies after its last use inside the
    // region, or when the recomputed function returns.
    std::vector<OpId> last(s.g.tensors.size(), kNone);
    for (OpId o = r.first; o <= r.last; ++o) {
      for (TensorId t : s.g.ops[o].inputs) last[t] = o;
      for (TensorId t : s.g.ops[o].keep_alive) last[t] = o;
    }
    std::vector<std::vector<StorageId>> dead_saved = DeadGraphSaves(s, r, last);
    std::optional<StorageId> fork = RngState(s, "checkpoint: fork_rng saved state");
    std::vector<TensorId> made;  // in-place outputs keep their owner's storage id after it is dropped
    ForwardOpPolicy keep;
    // Reentrant: what the recomputed function returns is kept by the caller's `outputs`.
    auto returned = [&](TensorId t) {
      return rule_.hold_grads_and_outputs && std::find(r.outputs.begin(), r.outputs.end(), t) != r.outputs.end();
    };
    for (OpId o = r.first; o <= stop; ++o) {
      s.ledger.set_op(o);
      ForwardOpPolicy policy = keep;
      // A node whose holders are gone (destroyed, or run without retain_graph) keeps nothing new.
      policy.save_for_backward = !s.nodes[o].destroyed && (r.done.empty() || !r.done[o - r.first]);
      s.Hook(&TrainingSetup::BeforeRecomputeOp, o, &policy);
      std::vector<StorageId>& cached = r.sac_cache[o - r.first];
      if (!cached.empty()) policy.sac_cached = &cached;
      policy.stops_before_kernel = o == stop && before_kernel && cached.empty();
      ExecuteForwardOp(s, o, storage, policy, /*recompute=*/true);
      KeepDeadSaves(s, r, o, storage, &dead_saved);
      for (StorageId st : cached) s.ledger.Unref(st);  // taken: popped from the cache
      cached.clear();
      s.Hook(&TrainingSetup::AfterRecomputeOp, o);
      for (TensorId t : s.g.ops[o].outputs) {
        if (policy.stops_before_kernel) break;  // never made
        made.push_back(t);
        if (returned(t)) {
          s.ledger.Ref(storage[t]);
          r.held.push_back(storage[t]);
        }
      }
      for (StorageId st : dead_saved[o - r.first]) s.ledger.Unref(st);
      for (TensorId t : made)
        if (last[t] == o) s.ledger.Unref(storage[t]);
    }
    s.Hook(&TrainingSetup::AfterRecompute);  // the recomputation's autocast region exits
    if (fork) s.ledger.Unref(*fork);  // fork_rng exits before the recomputed outputs are dropped
    for (OpId o = stop + 1; o <= r.last; ++o)  // an early stop unwinds the frames: their dead graphs die
      for (StorageId st : dead_saved[o - r.first]) s.ledger.Unref(st);
    for (TensorId t : made)  // the function's locals, and what the stopped part would have used
      if (last[t] == kNone || last[t] > stop) s.ledger.Unref(storage[t]);
    s.ledger.set_op(op);
  }

  /// Note [Dead graphs]: a node destroyed in forward has no holder, but the recomputation's pack
  /// hook returns the tensor itself (torch/utils/checkpoint.py `_recomputation_hook`), so its
  /// recomputed node keeps what it saves until that node dies again: after the last use of its
  /// outputs and of its dead consumers'. Per region op: that death point, as an index into the
  /// returned lists, which KeepDeadSaves fills.
  std::vector<std::vector<StorageId>> DeadGraphSaves(StepState& s, Region& r, const std::vector<OpId>& last) {
    dead_death_.assign(r.last - r.first + 1, kNone);
    for (OpId o = r.last + 1; o-- > r.first;) {
      if (!s.nodes[o].died) continue;
      OpId d = o;
      for (TensorId t : s.g.ops[o].outputs)
        if (last[t] != kNone) d = std::max(d, last[t]);
      for (OpId c = o + 1; c <= r.last; ++c)
        for (size_t i = 0; i < s.g.ops[c].inputs.size(); ++i)
          if (s.nodes[c].died && s.nodes[c].rg.test(i) && s.g.tensors[s.g.ops[c].inputs[i]].producer == o)
            d = std::max(d, dead_death_[c - r.first]);
      dead_death_[o - r.first] = d;
    }
    return std::vector<std::vector<StorageId>>(r.last - r.first + 1);
  }

  /// The recomputed dead node of |o| keeps its saved tensors until its death point; the nodes
  /// that die together go last made, first destroyed.
  void KeepDeadSaves(StepState& s, Region& r, OpId o, const std::vector<StorageId>& storage,
                     std::vector<std::vector<StorageId>>* dead_saved) {
    if (!s.nodes[o].died || !RuleFor(s.g.ops[o].kind).forward) return;
    FwdPlan plan;
    RuleFor(s.g.ops[o].kind).forward(s.Ctx(o), &plan);
    std::vector<StorageId>& at = (*dead_saved)[dead_death_[o - r.first] - r.first];
    for (const SavedRef& ref : plan.saved) {
      if (ref.kind == SavedRef::kExtra) continue;
      TensorId t = ref.kind == SavedRef::kInput ? s.g.ops[o].inputs[ref.index] : s.g.ops[o].outputs[ref.index];
      if (s.g.tensors[t].role != TensorRole::kActivation) continue;
      s.ledger.Ref(storage[t]);
      at.insert(at.begin(), storage[t]);
    }
  }

  void Release(StepState& s, Region& r) {
    if (r.released || !r.entered) return;
    r.released = true;
    for (StorageId h : r.held) s.ledger.Unref(h);
    r.held.clear();
    for (TensorId t : r.args) s.ledger.Unref(s.storage[t]);
    if (r.rng_state && !rule_.rng_state_lives_with_graph) {
      s.ledger.Unref(*r.rng_state);
      r.rng_state.reset();
    }
  }

  /// torch.get_rng_state(): host memory on CUDA (Profile::checkpoint_rng_state_bytes 0).
  static std::optional<StorageId> RngState(StepState& s, const char* name) {
    if (s.profile.checkpoint_rng_state_bytes <= 0) return std::nullopt;
    return s.ledger.Alloc(s.profile.checkpoint_rng_state_bytes, name, Category::kTemporary);
  }

  std::vector<std::string> modules_;
  CheckpointRule rule_;
  SacPolicy sac_;
  std::vector<bool> sac_save_;  ///< per op: the SAC policy caches its outputs
  std::vector<int> region_;  ///< per op: its region, or -1
  std::vector<OpId> dead_death_;  ///< per op of the region being recomputed (DeadGraphSaves)
  std::vector<Region> regions_;
  /// Note [Pipeline parallel]: a schedule keeps several microbatches' graphs in flight, each with
  /// its regions' state: the current pass slot's regions are regions_, the others parked here.
  size_t slot_ = 0;
  std::map<size_t, std::vector<Region>> parked_;
  std::vector<Region> fresh_;  ///< the regions before any pass

  void Enter(const StepState& s) {
    if (s.pass_slot == slot_) return;
    parked_[slot_] = std::move(regions_);
    auto it = parked_.find(s.pass_slot);
    regions_ = it != parked_.end() ? std::move(it->second) : fresh_;
    slot_ = s.pass_slot;
  }
};

}  // namespace

std::unique_ptr<TrainingSetup> MakeCheckpoint(const std::vector<std::string>& modules, CheckpointImpl impl,
                                              const SacPolicy& sac) {
  return std::make_unique<Checkpoint>(modules, impl, sac);
}

}  // namespace memsim
