// Tensor parallelism's setup (Note [Tensor parallel] in docs/parallel.md): parallelize_module
// turns each planned parameter of the full model every rank built into its DTensor shard
// (torch/distributed/tensor/parallel/style.py _partition_linear_fn → distribute_tensor in
// torch/distributed/tensor/_api.py; Shard._shard_tensor in placement_types.py). distribute_tensor
// splits the full tensor (torch.chunk; a dim-1 split is made contiguous, one copy per rank),
// allocates the local shard, and scatters from the group's first rank (src_data_rank=0), whose
// gloo scatter stages the chunks in one full-size flat tensor; the full parameter then dies. The
// graph (ApplyTensorParallel) already holds the shard sizes and the order. On the 2-D mesh this
// setup runs first (torchtitan: apply_tp, then apply_fsdp) and FSDP2 shards its local tensors.
#include <algorithm>

#include "lib/autodiff/setups/setups.h"
#include "lib/autodiff/state.h"

namespace memsim {
namespace {

class TensorParallel : public TrainingSetup {
 public:
  explicit TensorParallel(const ParallelOptions& o)
      : source_(CoordOf(o.mesh, o.rank).tp == 0), own_dtype_(!o.fsdp2_param_dtype.empty()), mesh_world_(o.mesh.world()),
        meta_(o.meta_init), fsdp2_(o.mesh.dp_shard > 1), pp_(o.mesh.pp > 1) {}

  /// The full parameter the model was built with, as model.to() leaves it. Built on the meta
  /// device (Note [Meta-device init]), to_empty materializes the local shard alone, or FSDP2's
  /// setup its shard of it on the 2-D mesh.
  bool AllocateParameter(StepState& s, TensorId t) override {
    const int64_t degree = s.g.tp_degree;
    for (const Graph::TpShard& sh : s.g.tp_shards)
      if (sh.param == t) {
        if (meta_ && fsdp2_) return false;
        s.storage[t] = s.ledger.Alloc(ShardBytes(s, t) * (meta_ ? 1 : degree), s.g.tensors[t].name + (meta_ ? "" : " (full)"),
                                      Category::kParameter);
        return true;
      }
    return false;
  }

  /// After the batch exists, as the kit (and FSDP2's setup) wraps the model: the device mesh
  /// (init_device_mesh: one int32 per rank of the whole mesh, on the CPU; its coordinate lookups
  /// and slices are a few bytes each, freed at once), then the shards in plan order.
  void OnSetupBatch(StepState& s) override {
    // With pp, torchtitan made the world mesh before the model (and the stage) were built.
    if (s.profile.host_collectives && !pp_)
      s.ledger.Alloc(4 * std::max<int64_t>(mesh_world_, 1), "DeviceMesh ranks", Category::kParameter);
    if (meta_ || pp_) return;  // meta: the shards were materialized as parameters; pp: per stage
    Partition(s, -1);
  }

  /// With pp: the parameters of local stage |stage|'s model part.
  void OnParallelizeStage(StepState& s, int stage) override {
    if (!meta_) Partition(s, stage);
  }

 private:
  /// Each parameter of the stage (-1: all) to its shard, in plan order.
  void Partition(StepState& s, int stage) {
    const int degree = s.g.tp_degree;
    for (const Graph::TpShard& sh : s.g.tp_shards) {
      if (!OfStage(s, sh.param, stage)) continue;
      const int64_t bytes = ShardBytes(s, sh.param);
      const std::string& name = s.g.tensors[sh.param].name;
      std::vector<Ledger::StorageId> chunks;
      if (sh.dim != 0)
        for (int r = 0; r < degree; ++r) chunks.push_back(s.ledger.Alloc(bytes, name + " chunk", Category::kTemporary));
      const Ledger::StorageId shard = s.ledger.Alloc(bytes, name, Category::kParameter);
      if (source_) s.ledger.Unref(s.ledger.Alloc(bytes * degree, name + " scatter staging", Category::kTemporary));
      for (Ledger::StorageId c : chunks) s.ledger.Unref(c);
      s.ledger.Unref(s.storage[sh.param]);
      s.storage[sh.param] = shard;
    }
  }

  /// A rank's shard: the bound size; under FSDP2's MixedPrecisionPolicy (the graph bound in
  /// param_dtype) the model keeps its own dtype, which only FSDP2's unsharded copy is cast from.
  int64_t ShardBytes(const StepState& s, TensorId t) const { return ModelBytes(s, t, own_dtype_); }

  bool source_;     // the tp group's first rank: distribute_tensor scatters from it
  bool own_dtype_;  // FSDP2 MixedPrecisionPolicy on the 2-D mesh
  int64_t mesh_world_;
  bool meta_;   // --init meta
  bool fsdp2_;  // the 2-D mesh: FSDP2 materializes the shards of the local tensors
  bool pp_;     // each pipeline stage's part is parallelized: its own parameters only
};

}  // namespace

std::unique_ptr<TrainingSetup> MakeTensorParallel(const ParallelOptions& options) {
  return std::make_unique<TensorParallel>(options);
}

}  // namespace memsim
