// The sharded-parameter engine (sharded.h): at construction each rank keeps a shard of every
// unit (the parameters themselves hold no memory: DeepSpeed and FSDP swap param.data, so the
// autograd graph's references to a parameter keep nothing alive); a unit is all-gathered into a
// full buffer before its forward (and, per policy, the next unit's too), freed after it (or
// kept to the backward), gathered again before its first backward node and freed after its
// last. FSDP then turns the unit's grads into one flat grad, reduce-scatters it into a sharded
// grad kept for the optimizer, and the optimizer steps the shards.
#include "lib/autodiff/setups/sharded.h"

#include <algorithm>

#include "lib/autodiff/state.h"

namespace memsim {

bool WithinModule(const std::string& module, const std::string& root) {
  return root.empty() || module == root ||
         (module.size() > root.size() && module.compare(0, root.size(), root) == 0 && module[root.size()] == '.');
}

std::string OwnerModule(const std::string& param_name) {
  size_t dot = param_name.rfind('.');
  return dot == std::string::npos ? std::string() : param_name.substr(0, dot);
}

namespace {


int64_t RoundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

}  // namespace

std::vector<ShardUnit> MakeShardUnits(const Graph& g, const BoundGraph& b, const ShardPolicy& p,
                                      const std::vector<std::string>& wrapped) {
  std::vector<ShardUnit> units;
  auto unit_of = [&](const std::string& module) -> ShardUnit& {
    for (ShardUnit& u : units)
      if (u.module == module) return u;
    units.push_back(ShardUnit{module, {}, 0, 0, 0, kNone, kNone});
    return units.back();
  };
  const int64_t world = std::max(p.world, 1);
  for (size_t k = 0; k < g.parameters.size(); ++k) {
    const TensorMeta& m = b.metas[g.parameters[k]];
    const std::string owner = OwnerModule(g.tensors[g.parameters[k]].name);
    if (!p.flat) {
      if (m.numel() <= p.persistence_threshold) continue;
      ShardUnit& u = unit_of(owner);
      u.params.push_back(static_cast<uint32_t>(k));
      const int64_t shard = (m.numel() + world - 1) / world * ElementSize(m.dtype);
      u.shard_bytes += shard;
      u.low_shard_bytes += shard;
      u.full_bytes += shard * world;
      continue;
    }
    std::string best;
    bool found = false;
    for (const std::string& w : wrapped)
      if (WithinModule(owner, w) && (!found || w.size() > best.size())) best = w, found = true;
    unit_of(found ? best : std::string()).params.push_back(static_cast<uint32_t>(k));
  }
  if (p.flat)
    for (ShardUnit& u : units) {
      int64_t numel = 0, elem = 4, shard_elem = 4;
      for (uint32_t k : u.params) {
        numel += b.metas[g.parameters[k]].numel();
        elem = ElementSize(b.metas[g.parameters[k]].dtype);
        shard_elem = p.mixed_precision ? ElementSize(g.tensors[g.parameters[k]].dtype) : elem;
      }
      const int64_t padded = RoundUp(numel, world);
      u.full_bytes = padded * elem;
      u.low_shard_bytes = padded / world * elem;
      u.shard_bytes = padded / world * shard_elem;
    }
  for (ShardUnit& u : units)
    for (OpId o = 0; o < g.ops.size(); ++o)
      if (WithinModule(g.ops[o].module, u.module)) {
        if (u.first == kNone) u.first = o;
        u.last = o;
      }
  // Units no op runs (unused parameters) are gathered never; units in forward order.
  // (an outer unit before the units inside it: its pre-forward hook runs first).
  std::stable_sort(units.begin(), units.end(), [](const ShardUnit& x, const ShardUnit& y) {
    return x.first < y.first || (x.first == y.first && x.last != kNone && y.last != kNone && x.last > y.last);
  });
  return units;
}

namespace {

class ShardedParams : public TrainingSetup {
 public:
  ShardedParams(ShardPolicy p, std::vector<std::string> wrapped) : p_(std::move(p)), wrapped_(std::move(wrapped)) {}

  bool AllocateParameter(StepState& s, TensorId t) override {
    Init(s);
    if (s.param_index[t] == kNoStorage) return false;
    const int u = unit_of_param_[s.param_index[t]];
    if (u < 0) return false;
    if (shard_[u] == kNoStorage && !shard_made_[u]) {
      shard_made_[u] = true;
      if (p_.offload_params)
        s.ledger.AddHostBytes(units_[u].shard_bytes);
      else
        shard_[u] = s.ledger.Alloc(units_[u].shard_bytes, p_.label + " shard " + Name(u), Category::kParameter);
    }
    s.storage[t] = s.ledger.Alloc(0, s.g.tensors[t].name + " (sharded)", Category::kParameter);
    return true;
  }

  void BeforeForwardOp(StepState& s, OpId o, ForwardOpPolicy*) override {
    for (size_t u = 0; u < units_.size(); ++u)
      if (units_[u].first == o) {
        Gather(s, u);
        if (p_.prefetch_forward && !s.cfg.first_step && u + 1 < units_.size()) Gather(s, u + 1);
      }
  }

  void AfterForwardOp(StepState& s, OpId o) override {
    for (size_t u = 0; u < units_.size(); ++u)
      if (units_[u].last == o && p_.reshard_after_forward && !units_[u].module.empty()) Release(s, u);
  }

  void BeforeBackwardNode(StepState& s, OpId o) override {
    for (size_t u = units_.size(); u-- > 0;) {
      ShardUnit& unit = units_[u];
      if (o < unit.first || o > unit.last || counted_[u]) continue;
      counted_[u] = true;
      pending_[u] = 0;
      for (OpId k = unit.first; k <= unit.last; ++k) pending_[u] += s.nodes[k].exists && s.nodes[k].reachable;
      Gather(s, u);
      if (p_.prefetch_backward)
        for (size_t v = u; v-- > 0;)
          if (!counted_[v] && units_[v].last < unit.first) {
            Gather(s, v);
            break;
          }
    }
  }

  void AfterBackwardNode(StepState& s, OpId o) override {
    for (size_t u = 0; u < units_.size(); ++u)
      if (counted_[u] && o >= units_[u].first && o <= units_[u].last && --pending_[u] == 0 && !units_[u].module.empty())
        Release(s, u);
  }

  void AfterBackwardPass(StepState& s) override {
    for (size_t u = 0; u < units_.size(); ++u) {
      Release(s, u);
      counted_[u] = false;
    }
  }

  void OnGradReady(StepState& s, uint32_t k) override {
    if (!p_.reduce_scatter_grads || unit_of_param_[k] < 0) return;
    const int u = unit_of_param_[k];
    if (++ready_[u] < trainable_[u]) return;
    ready_[u] = 0;
    // The FlatParameter's grad (the unit's grads concatenated, padded), reduce-scattered into
    // a new shard-sized grad, which becomes the sharded grad (or is added to it from the second
    // pass on and dropped); then the unsharded grad is freed. Mixed precision: the
    // reduce-scatter runs in the low dtype and its output is cast to the shard's dtype.
    StorageId full = s.ledger.Alloc(units_[u].full_bytes, p_.label + " unsharded grad " + Name(u), Category::kGradient);
    for (uint32_t q : units_[u].params)
      if (s.param_grad[q] != kNoStorage) {
        s.ledger.Unref(s.param_grad[q]);
        s.param_grad[q] = kNoStorage;
      }
    StorageId shard = s.ledger.Alloc(units_[u].low_shard_bytes, p_.label + " sharded grad " + Name(u), Category::kGradient);
    if (units_[u].low_shard_bytes != units_[u].shard_bytes) {  // _cast_grad_to_param_dtype
      StorageId cast = s.ledger.Alloc(units_[u].shard_bytes, p_.label + " sharded grad " + Name(u), Category::kGradient);
      s.ledger.Unref(shard);
      shard = cast;
    }
    if (grad_[u] == kNoStorage) {
      grad_[u] = shard;
    } else {
      s.ledger.Unref(shard);  // _saved_grad_shard += sharded_grad
    }
    s.ledger.Unref(full);
    if (p_.offload_params) {  // copied to the host's grad shard
      s.ledger.Unref(grad_[u]);
      grad_[u] = kNoStorage;
      if (!host_grad_[u]) s.ledger.AddHostBytes(units_[u].shard_bytes);
      host_grad_[u] = true;
    }
  }

  void OnOptimizerParams(const StepState&, std::vector<OptParam>* ps) override {
    if (!p_.reduce_scatter_grads) return;  // ZeRO-3: the ZeRO setup's partitions
    ps->clear();
    if (p_.offload_params) return;  // the optimizer steps the host shards
    for (size_t u = 0; u < units_.size(); ++u)
      if (trainable_[u] > 0) ps->push_back(OptParam{p_.label + " flat parameter " + Name(u), units_[u].shard_bytes, grad_[u]});
  }

  void OnSetup(StepState& s) override {
    if (!p_.offload_params || !p_.reduce_scatter_grads) return;
    for (size_t u = 0; u < units_.size(); ++u)  // the optimizer state of the host shards
      if (trainable_[u] > 0) s.ledger.AddHostBytes(s.cfg.optimizer.states * units_[u].shard_bytes);
  }

  void AfterOptimizerStep(StepState& s) override {
    for (StorageId& gs : grad_)
      if (gs != kNoStorage) {
        s.ledger.Unref(gs);  // zero_grad(set_to_none=True) on the sharded flat parameters
        gs = kNoStorage;
      }
  }

 private:
  void Init(const StepState& s) {
    if (initialized_) return;
    initialized_ = true;
    units_ = MakeShardUnits(s.g, s.bound, p_, wrapped_);
    unit_of_param_.assign(s.g.parameters.size(), -1);
    trainable_.assign(units_.size(), 0);
    for (size_t u = 0; u < units_.size(); ++u)
      for (uint32_t k : units_[u].params) {
        unit_of_param_[k] = static_cast<int>(u);
        trainable_[u] += s.rg[s.g.parameters[k]] ? 1 : 0;
      }
    shard_.assign(units_.size(), kNoStorage);
    shard_made_.assign(units_.size(), false);
    host_grad_.assign(units_.size(), false);
    gathered_.assign(units_.size(), kNoStorage);
    grad_.assign(units_.size(), kNoStorage);
    ready_.assign(units_.size(), 0);
    pending_.assign(units_.size(), 0);
    counted_.assign(units_.size(), false);
  }

  std::string Name(size_t u) const { return units_[u].module.empty() ? "(root)" : units_[u].module; }

  void Gather(StepState& s, size_t u) {
    if (gathered_[u] != kNoStorage || units_[u].first == kNone) return;
    // Mixed precision: the shard is first cast into the low-precision shard (_mp_shard), which
    // the all-gather reads and which is freed once the unit is unsharded.
    StorageId low = kNoStorage;
    if (units_[u].low_shard_bytes != units_[u].shard_bytes)
      low = s.ledger.Alloc(units_[u].low_shard_bytes, p_.label + " low-precision shard " + Name(u), Category::kParameter);
    gathered_[u] = s.ledger.Alloc(units_[u].full_bytes, p_.label + " gathered " + Name(u), Category::kParameter);
    if (low != kNoStorage) s.ledger.Unref(low);
  }

  void Release(StepState& s, size_t u) {
    if (gathered_[u] == kNoStorage) return;
    s.ledger.Unref(gathered_[u]);
    gathered_[u] = kNoStorage;
  }

  ShardPolicy p_;
  std::vector<std::string> wrapped_;
  bool initialized_ = false;
  std::vector<ShardUnit> units_;
  std::vector<int> unit_of_param_;  ///< per Graph::parameters entry: its unit, or -1 (whole)
  std::vector<int> trainable_, ready_, pending_;
  std::vector<bool> counted_, shard_made_, host_grad_;
  std::vector<StorageId> shard_, gathered_, grad_;
};

}  // namespace

std::unique_ptr<TrainingSetup> MakeShardedParams(const ShardPolicy& policy, std::vector<std::string> wrapped) {
  return std::make_unique<ShardedParams>(policy, std::move(wrapped));
}

}  // namespace memsim
