// Context parallelism's setup (Note [Context parallel] in docs/parallel.md): one rank of
// torch.distributed.tensor.experimental.context_parallel(mesh, buffers=[inputs, labels],
// buffer_seq_dims=[1, 1], no_restore_buffers={inputs, labels}) around forward, loss and backward,
// as torchtitan's train_context runs it (torch/distributed/tensor/experimental/_context_parallel/
// _attention.py, context_parallel and _context_parallel_buffers; _load_balancer.py,
// _HeadTailLoadBalancer._generate_indices). The graph is bound at seq/cp (BindingsOf); the ring
// attention is the sdpa rule's (lib/ops/ring_attention.h). This setup holds what the context
// allocates around them:
//   - the batch (the inputs whose shape names the `seq` symbol) is built whole and sharded in
//     place by resize_, which keeps the whole storage;
//   - the context's entry, before the first forward op: the load balancer's head-tail indices,
//     and per buffer the gather into the balanced order (its int32 index made int64), the
//     rank's shard (distribute_tensor(..., src_data_rank=None): a contiguous chunk) and its clone
//     copied into the buffer. The shards and the last clone stay in the suspended generator's
//     frame until the context exits after backward.
#include <algorithm>

#include "lib/autodiff/setups/setups.h"
#include "lib/autodiff/state.h"

namespace memsim {
namespace {

class ContextParallel : public TrainingSetup {
 public:
  explicit ContextParallel(const ParallelOptions& o)
      : world_(o.mesh.cp), mesh_world_(o.mesh.world()), own_mesh_(o.mesh.dp_shard <= 1) {}

  bool AllocateInput(StepState& s, TensorId t) override {
    if (!Sharded(s, t)) return false;
    s.storage[t] = s.ledger.Alloc(s.bound.metas[t].bytes() * world_, s.g.tensors[t].name, Category::kInput);
    return true;
  }

  /// init_device_mesh: one int32 per rank of the mesh, on the CPU (FSDP2's setup makes it when
  /// dp_shard is in the mesh).
  void OnSetupBatch(StepState& s) override {
    if (s.profile.host_collectives && own_mesh_)
      s.ledger.Alloc(4 * std::max<int64_t>(mesh_world_, 1), "DeviceMesh ranks", Category::kParameter);
  }

  void BeforeForwardOp(StepState& s, OpId, ForwardOpPolicy*) override {
    if (entered_) return;
    entered_ = true;
    Ledger& l = s.ledger;
    const bool load_balance = s.profile.cp.load_balance;
    int64_t seq = 0;  // the whole sequence: the first buffer's
    std::vector<TensorId> buffers;
    for (TensorId t : s.g.inputs)
      if (Sharded(s, t)) buffers.push_back(t);
    if (buffers.empty()) return;
    const TensorMeta& first = s.bound.metas[buffers[0]];
    seq = first.sizes.size() > 1 ? first.sizes[1] * world_ : 0;
    Ledger::StorageId indices = kNoStorage;
    if (load_balance) {  // _HeadTailLoadBalancer._generate_indices(restore=False)
      auto arange = l.Alloc(4 * seq, "cp indices arange", Category::kTemporary);
      auto head = l.Alloc(8 * world_, "cp head_idx", Category::kTemporary);
      auto scalar = l.Alloc(8, "cp wrapped scalar", Category::kTemporary);
      auto tail = l.Alloc(8 * world_, "cp tail_idx", Category::kTemporary);
      l.Unref(scalar);
      auto heads = l.Alloc(2 * seq, "cp chunks[head_idx]", Category::kTemporary);
      auto tails = l.Alloc(2 * seq, "cp chunks[tail_idx]", Category::kTemporary);
      indices = l.Alloc(4 * seq, "cp load-balance indices", Category::kTemporary);
      for (auto id : {tails, heads, arange, head, tail}) l.Unref(id);
    }
    for (TensorId t : buffers) {  // _context_parallel_buffers
      const int64_t whole = s.bound.metas[t].bytes() * world_, rows = s.bound.metas[t].sizes[0];
      Ledger::StorageId gathered = kNoStorage;
      if (load_balance) {
        gathered = l.Alloc(whole, "cp gather", Category::kTemporary);
        l.Unref(l.Alloc(8 * whole / ElementSize(s.bound.metas[t].dtype), "cp gather index", Category::kTemporary));
      }
      if (rows > 1 || load_balance) shards_.push_back(l.Alloc(whole / world_, "cp shard", Category::kTemporary));
      if (gathered != kNoStorage) l.Unref(gathered);
    }
    if (indices != kNoStorage) l.Unref(indices);
    for (TensorId t : buffers) {  // shard.clone(), copied into the resized buffer
      if (clone_ != kNoStorage) l.Unref(clone_);
      clone_ = l.Alloc(s.bound.metas[t].bytes(), "cp shard clone", Category::kTemporary);
    }
  }

  /// The context exits after backward: its generator frame (the shards, the last clone) dies;
  /// each accumulation pass enters it again.
  void AfterBackwardPass(StepState& s) override {
    entered_ = false;
    for (auto id : shards_) s.ledger.Unref(id);
    shards_.clear();
    if (clone_ != kNoStorage) s.ledger.Unref(clone_);
    clone_ = kNoStorage;
  }

 private:
  /// A CP buffer: an input whose declared shape names the `seq` symbol (dim 1).
  static bool Sharded(const StepState& s, TensorId t) {
    const uint32_t seq = s.g.FindSymbol("seq");
    const SymShape& shape = s.g.tensors[t].shape;
    return seq != kNone && shape.size() > 1 &&
           std::find(shape[1].symbols.begin(), shape[1].symbols.end(), seq) != shape[1].symbols.end();
  }

  int world_;
  int64_t mesh_world_;
  bool own_mesh_;
  bool entered_ = false;
  std::vector<Ledger::StorageId> shards_;
  Ledger::StorageId clone_ = kNoStorage;
};

}  // namespace

std::unique_ptr<TrainingSetup> MakeContextParallel(const ParallelOptions& options) {
  return std::make_unique<ContextParallel>(options);
}

}  // namespace memsim
