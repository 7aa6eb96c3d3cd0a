// torch.autocast around the forward and the loss, or the forward alone (BoundGraph::
// autocast_exit, --amp-loss outside) (Note [Autocast] in docs/op-rules.md): the
// cast copies autocast makes of an op's inputs (the dtypes were decided when the graph was
// bound: BoundGraph::casts), which the op saves in place of its inputs; the cache of the
// lower-precision casts of trainable fp32 parameters, kept until the region exits; and in
// backward each cast's ToCopyBackward0, which casts the grad back to the source's dtype; a
// checkpoint's recomputation makes its casts again, in a region (and cache) of its own.
#include <map>

#include "lib/autodiff/setups/setups.h"
#include "lib/autodiff/state.h"

namespace memsim {
namespace {

class Autocast : public TrainingSetup {
 public:
  void BeforeForwardOp(StepState& s, OpId o, ForwardOpPolicy* policy) override {
    if (s.bound.autocast_exit != kNone && o == s.bound.autocast_exit) ExitRegion(s, &forward_);
    MakeCasts(s, o, policy, &forward_, /*count_uses=*/true);
  }

  /// A checkpoint's recomputation runs in a region of its own (torch.utils.checkpoint enters
  /// torch.autocast with the forward's state): the casts are made again, with a cache of their
  /// own, cleared when it exits. The grads still flow through the forward's nodes, whose
  /// ToCopyBackward0 uses were counted in the forward.
  void BeforeRecomputeOp(StepState& s, OpId o, ForwardOpPolicy* policy) override {
    MakeCasts(s, o, policy, &recompute_, /*count_uses=*/false);
  }
  void AfterRecomputeOp(StepState& s, OpId o) override { AfterForwardOp(s, o); }
  void AfterRecompute(StepState& s) override { ExitRegion(s, &recompute_); }

  void AfterForwardOp(StepState& s, OpId) override {
    for (StorageId st : op_local_) s.ledger.Unref(st);
    op_local_.clear();
  }

  /// The forward and the loss are over (the region has exited already when the loss is outside).
  void AfterForwardPass(StepState& s) override { ExitRegion(s, &forward_); }

  /// Uses whose node backward never reached (not on the loss's path) leave their cast's
  /// ToCopyBackward0 unrun: its partial sum dies with the graph.
  void AfterBackwardPass(StepState& s) override {
    for (auto& [k, p] : cached_uses_)
      if (p.sum.defined()) s.ledger.Unref(p.sum.s);
    cached_uses_.clear();
  }

  void OnInputGrad(StepState& s, OpId o, size_t i, Grad* grad) override {
    if (o >= s.bound.casts.size()) return;
    const InputCast* cast = CastOf(s, o, i);
    if (cast == nullptr || !cast->copy) return;
    TensorId t = s.g.ops[o].inputs[i];
    if (!Cacheable(s, t, *cast)) {
      if (grad->defined()) ToCopyBackward(s, t, grad);
      return;
    }
    // One ToCopyBackward0 node for every use of a cached cast: it sums the grads of the uses
    // in the cast's dtype and runs once the last one has arrived.
    Pending& p = cached_uses_[s.param_index[t]];
    if (grad->defined()) {
      if (!p.sum.defined()) {
        p.sum = *grad;
      } else if (CanAccumulateInplace(s.profile, p.sum, s.ledger.refs(p.sum.s))) {
        s.ledger.Unref(grad->s);
      } else {
        StorageId sum = s.ledger.Alloc(cast->meta.bytes(), s.g.tensors[t].name + ".grad", Category::kGradient);
        s.ledger.Unref(p.sum.s);
        s.ledger.Unref(grad->s);
        p.sum.s = sum;
      }
    }
    *grad = Grad{};
    if (--p.remaining > 0) return;
    *grad = p.sum;
    p.sum = Grad{};
    if (grad->defined()) ToCopyBackward(s, t, grad);
  }

 private:
  /// The weight-cast cache of one autocast region: parameter index → its cached cast.
  struct Cache {
    std::map<uint32_t, StorageId> casts;
    std::vector<uint32_t> order;  ///< insertion order (the frees at region exit)
  };

  void MakeCasts(StepState& s, OpId o, ForwardOpPolicy* policy, Cache* cache, bool count_uses) {
    if (o >= s.bound.casts.size() || s.bound.casts[o].empty()) return;
    const Op& op = s.g.ops[o];
    policy->input_storage.assign(op.inputs.size(), kNoStorage);
    for (const InputCast& cast : s.bound.casts[o]) {
      if (!cast.copy) continue;
      TensorId t = op.inputs[cast.input];
      std::string name = s.g.tensors[t].name + " (autocast " + std::string(DtypeName(cast.meta.dtype)) + ")";
      StorageId st;
      if (Cacheable(s, t, cast)) {
        uint32_t k = s.param_index[t];
        auto it = cache->casts.find(k);
        if (it == cache->casts.end()) {
          // cached_cast: the cache keeps the copy until the outermost region exits.
          it = cache->casts.emplace(k, s.ledger.Alloc(cast.meta.bytes(), name, Category::kActivation, op.module)).first;
          cache->order.push_back(k);
        }
        st = it->second;
        s.ledger.Ref(st);
        if (count_uses) ++cached_uses_[k].remaining;
      } else {
        st = s.ledger.Alloc(cast.meta.bytes(), name, Category::kActivation, op.module);
      }
      policy->input_storage[cast.input] = st;
      op_local_.push_back(st);
    }
  }

  /// The `with torch.autocast(...)` block ends: clear_cache() drops the cached casts (those a
  /// node saved stay alive until its backward).
  void ExitRegion(StepState& s, Cache* cache) {
    for (uint32_t k : cache->order) s.ledger.Unref(cache->casts.at(k));
    cache->casts.clear();
    cache->order.clear();
  }

  struct Pending {
    int remaining = 0;
    Grad sum;
  };

  /// cached_cast caches a cast to the lower-precision type of an fp32 leaf requiring grad that
  /// is not a view: a trainable parameter. Frozen parameters are cast again at every use.
  static bool Cacheable(const StepState& s, TensorId t, const InputCast& cast) {
    return s.param_index[t] != kNoStorage && s.rg[t] && s.bound.metas[t].dtype == Dtype::kFloat32 &&
           s.bound.autocast && cast.meta.dtype == *s.bound.autocast;
  }

  static const InputCast* CastOf(const StepState& s, OpId o, size_t i) {
    for (const InputCast& c : s.bound.casts[o])
      if (static_cast<size_t>(c.input) == i) return &c;
    return nullptr;
  }

  /// ToCopyBackward0: grad.to(source dtype), a new tensor; the cast-dtype grad is dropped.
  static void ToCopyBackward(StepState& s, TensorId t, Grad* grad) {
    const TensorMeta& m = s.bound.metas[t];
    StorageId st = s.ledger.Alloc(m.bytes(), s.g.tensors[t].name + ".grad", Category::kGradient);
    s.ledger.Unref(grad->s);
    *grad = Grad{st, *TensorMeta::Contiguous(m.dtype, m.sizes)};
  }

  Cache forward_;                           ///< the forward's region
  Cache recompute_;                         ///< a checkpoint recomputation's region
  std::map<uint32_t, Pending> cached_uses_; ///< parameter index → its ToCopyBackward0 node
  std::vector<StorageId> op_local_;         ///< this op's references to its cast inputs
};

}  // namespace

std::unique_ptr<TrainingSetup> MakeAutocast() { return std::make_unique<Autocast>(); }

}  // namespace memsim
