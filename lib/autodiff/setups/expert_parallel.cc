// Expert parallelism's setup (Note [Expert parallel] in docs/parallel.md): torchtitan's
// ExpertParallel._partition_fn (torchtitan/distributed/expert_parallel.py) turns each expert
// weight of the full model every rank built into its Shard(0) DTensor: for each of the
// module's parameters (named_parameters(recurse=False)) distribute_tensor allocates the local
// shard and scatters from the group's first rank (src_data_rank=0), whose gloo scatter stages
// the chunks in one full-size flat tensor (as in tensor_parallel.cc); the full parameters die
// only when the loop ends, as named_parameters' memo set holds them until then. The graph
// (ApplyExpertParallel) holds the shard sizes and the order. In the step, ExpertParallel keeps
// the last dispatch's permutation as a module attribute (self.permuted_indices): it outlives the
// step until the next forward replaces it.
#include <algorithm>
#include <map>

#include "lib/autodiff/setups/setups.h"
#include "lib/autodiff/state.h"

namespace memsim {
namespace {

class ExpertParallel : public TrainingSetup {
 public:
  explicit ExpertParallel(const ParallelOptions& o)
      : source_(EpCoordOf(o.mesh, o.rank).ep == 0), world_(o.mesh.world()), meta_(o.meta_init),
        fsdp2_mp_(!o.fsdp2_param_dtype.empty()), pp_(o.mesh.pp > 1) {}

  /// The full [E, ...] parameter the model was built with. Built on the meta device (Note
  /// [Meta-device init]) there is none: distribute_tensor moves no data and to_empty makes the
  /// local shard (FSDP2's, or the plain parameter's allocation).
  bool AllocateParameter(StepState& s, TensorId t) override {
    if (meta_) return false;
    if (std::find(s.g.ep_shards.begin(), s.g.ep_shards.end(), t) == s.g.ep_shards.end()) return false;
    s.storage[t] = s.ledger.Alloc(ModelBytes(s, t, fsdp2_mp_) * s.g.ep_degree, s.g.tensors[t].name + " (full)",
                                  Category::kParameter);
    return true;
  }

  /// After the batch exists, as the kit (and torchtitan's parallelize step) applies it: the
  /// device mesh (one int32 per rank), then each MoE layer's expert weights in order. With pp
  /// the meshes were made before the model, and each stage's part is parallelized in turn.
  void OnSetupBatch(StepState& s) override {
    if (meta_ || pp_) return;
    if (s.profile.host_collectives) s.ledger.Alloc(4 * std::max<int64_t>(world_, 1), "DeviceMesh ranks", Category::kParameter);
    Partition(s, -1);
  }

  /// With pp: the experts of local stage |stage|'s model part.
  void OnParallelizeStage(StepState& s, int stage) override {
    if (!meta_) Partition(s, stage);
  }

  /// Each expert weight of the stage (-1: all) to its shard.
  void Partition(StepState& s, int stage) {
    std::vector<Ledger::StorageId> full;
    for (TensorId p : s.g.ep_shards) {
      if (!OfStage(s, p, stage)) continue;
      const int64_t bytes = ModelBytes(s, p, fsdp2_mp_);
      const std::string& name = s.g.tensors[p].name;
      const Ledger::StorageId shard = s.ledger.Alloc(bytes, name, Category::kParameter);
      if (source_) s.ledger.Unref(s.ledger.Alloc(bytes * s.g.ep_degree, name + " scatter staging", Category::kTemporary));
      full.push_back(s.storage[p]);
      s.storage[p] = shard;
      if (NextModule(s, p)) Release(s, &full);
    }
    Release(s, &full);
  }

  /// The dispatch's permutation, held by the module until the next dispatch of that layer.
  void AfterForwardOp(StepState& s, OpId op) override {
    const Op& o = s.g.ops[op];
    if (o.kind != OpKind::kEpDispatch) return;
    const Ledger::StorageId perm = s.storage[o.outputs[2]];
    s.ledger.Ref(perm);
    auto [it, fresh] = held_.emplace(op, perm);
    if (!fresh) {
      s.ledger.Unref(it->second);
      it->second = perm;
    }
  }

 private:
  /// Whether the parameter after |p| belongs to another module (its loop ends here).
  static bool NextModule(const StepState& s, TensorId p) {
    auto it = std::find(s.g.ep_shards.begin(), s.g.ep_shards.end(), p);
    if (++it == s.g.ep_shards.end()) return false;
    auto owner = [&](TensorId t) { const std::string& n = s.g.tensors[t].name; return n.substr(0, n.rfind('.')); };
    return owner(*it) != owner(p);
  }

  static void Release(StepState& s, std::vector<Ledger::StorageId>* full) {
    for (Ledger::StorageId f : *full) s.ledger.Unref(f);
    full->clear();
  }

  bool source_;  // the ep group's first rank: distribute_tensor scatters from it
  int64_t world_;
  bool meta_;     // the model built on the meta device
  bool fsdp2_mp_;  // FSDP2's MixedPrecisionPolicy: the model keeps the graph's dtype (ModelBytes)
  bool pp_;        // each pipeline stage's part is parallelized: its own experts only
  std::map<OpId, Ledger::StorageId> held_;
};

}  // namespace

std::unique_ptr<TrainingSetup> MakeExpertParallel(const ParallelOptions& options) {
  return std::make_unique<ExpertParallel>(options);
}

}  // namespace memsim
