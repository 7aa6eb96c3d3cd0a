// torch.autocast around the forward and the loss (Note [Autocast] in docs/op-rules.md): the
// cast copies autocast makes of an op's inputs (the dtypes were decided when the graph was
// bound: BoundGraph::casts), which the op saves in place of its inputs; the cache of the
// lower-precision casts of trainable fp32 parameters, kept until the region exits; and in
// backward each cast's ToCopyBackward0, which casts the grad back to the source's dtype.
#include <map>

#include "lib/autodiff/setups/setups.h"
#include "lib/autodiff/state.h"

namespace memsim {
namespace {

class Autocast : public TrainingSetup {
 public:
  void BeforeForwardOp(StepState& s, OpId o, ForwardOpPolicy* policy) override {
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
        auto it = cache_.find(k);
        if (it == cache_.end()) {
          // cached_cast: the cache keeps the copy until the outermost region exits.
          it = cache_.emplace(k, s.ledger.Alloc(cast.meta.bytes(), name, Category::kActivation, op.module)).first;
          cache_order_.push_back(k);
        }
        st = it->second;
        s.ledger.Ref(st);
        ++cached_uses_[k].remaining;
      } else {
        st = s.ledger.Alloc(cast.meta.bytes(), name, Category::kActivation, op.module);
      }
      policy->input_storage[cast.input] = st;
      op_local_.push_back(st);
    }
  }

  void AfterForwardOp(StepState& s, OpId) override {
    for (StorageId st : op_local_) s.ledger.Unref(st);
    op_local_.clear();
  }

  /// The `with torch.autocast(...)` block ends: clear_cache() drops the cached casts (those a
  /// node saved stay alive until its backward).
  void AfterForwardPass(StepState& s) override {
    for (uint32_t k : cache_order_) s.ledger.Unref(cache_.at(k));
    cache_.clear();
    cache_order_.clear();
  }

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
      } else if (s.profile.accumulate_inplace) {
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

  std::map<uint32_t, StorageId> cache_;     ///< parameter index → its cached cast
  std::vector<uint32_t> cache_order_;       ///< insertion order (the frees at region exit)
  std::map<uint32_t, Pending> cached_uses_; ///< parameter index → its ToCopyBackward0 node
  std::vector<StorageId> op_local_;         ///< this op's references to its cast inputs
};

}  // namespace

std::unique_ptr<TrainingSetup> MakeAutocast() { return std::make_unique<Autocast>(); }

}  // namespace memsim
