// Tensor parallelism's setup (Note [Tensor parallel] in docs/parallel.md): parallelize_module
// turns each planned parameter of the full model every rank built into its DTensor shard
// (torch/distributed/tensor/parallel/style.py _partition_linear_fn → distribute_tensor in
// torch/distributed/tensor/_api.py; Shard._shard_tensor in placement_types.py). distribute_tensor
// splits the full tensor (torch.chunk; a dim-1 split is made contiguous, one copy per rank),
// allocates the local shard, and scatters from the group's first rank (src_data_rank=0), whose
// gloo scatter stages the chunks in one full-size flat tensor; the full parameter then dies. The
// graph (ApplyTensorParallel) already holds the shard sizes and the order.
#include "lib/autodiff/setups/setups.h"
#include "lib/autodiff/state.h"

namespace memsim {
namespace {

class TensorParallel : public TrainingSetup {
 public:
  explicit TensorParallel(const ParallelOptions& o) : source_(CoordOf(o.mesh, o.rank).tp == 0) {}

  /// The full parameter the model was built with, as model.to() leaves it.
  bool AllocateParameter(StepState& s, TensorId t) override {
    const int64_t degree = s.g.tp_degree;
    for (const Graph::TpShard& sh : s.g.tp_shards)
      if (sh.param == t) {
        s.storage[t] = s.ledger.Alloc(s.bound.metas[t].bytes() * degree, s.g.tensors[t].name + " (full)",
                                      Category::kParameter);
        return true;
      }
    return false;
  }

  void OnSetup(StepState& s) override {
    const int degree = s.g.tp_degree;
    for (const Graph::TpShard& sh : s.g.tp_shards) {
      const int64_t bytes = s.bound.metas[sh.param].bytes();
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

 private:
  bool source_;  // the tp group's first rank: distribute_tensor scatters from it
};

}  // namespace

std::unique_ptr<TrainingSetup> MakeTensorParallel(const ParallelOptions& options) {
  return std::make_unique<TensorParallel>(options);
}

}  // namespace memsim
