// nn.DataParallel over N devices in one process (Note [DataParallel] in docs/op-rules.md); the
// step of one device, bound with its chunk of the batch (torch.chunk: ceil(B / N) per device).
// Device 0 holds the model, the whole input batch (chunk 0 is a view of it), the outputs
// gathered from every device and the loss over them, the parameters' .grad and the optimizer.
// Every forward, the other devices receive a replica of the parameters and buffers
// (broadcast_coalesced: flat copies in 10 MiB buckets, which the replica's tensors are views of;
// kept alive by autograd until the backward is over) and their chunk of the input. In backward the
// replicas' parameter grads wait in BroadcastBackward's input buffer until every device is done,
// then reduce_add_coalesced flattens them per 10 MiB bucket on each device, copies the other
// devices' flats to device 0 one at a time and adds them into device 0's; device 0's
// AccumulateGrad then copies each parameter's slice of the result into .grad (the slices share
// the flat's storage). The loss runs on device 0 over the gathered outputs, at the whole batch:
// every tensor of the loss ops (those downstream of the model's outputs) and every grad the loss's
// backward makes whose leading dimension is the chunk gets the other devices' part beside it
// (saved ones until their producer's backward node, the others until the forward ends); the
// whole-batch grad of the gathered outputs lives until the model's output op has run backward
// (Gather's backward scatters it, device 0's chunk a view of it).
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lib/autodiff/setups/ddp.h"
#include "lib/autodiff/setups/setups.h"
#include "lib/autodiff/state.h"

namespace memsim {
namespace {

constexpr int64_t kCoalesceBytes = int64_t{10} << 20;  // broadcast/reduce_add_coalesced buffer_size

/// The 10 MiB per-dtype buckets of |tensors|' bytes (comm.*_coalesced).
std::vector<int64_t> Buckets(const StepState& s, const std::vector<TensorId>& tensors) {
  std::vector<BucketItem> items;
  for (TensorId t : tensors) items.push_back({s.bound.metas[t].bytes(), static_cast<int>(s.bound.metas[t].dtype)});
  std::vector<int64_t> out;
  for (const auto& b : ComputeBucketAssignmentBySize(items, {kCoalesceBytes}, true)) {
    int64_t bytes = 0;
    for (size_t i : b) bytes += items[i].bytes;
    out.push_back(bytes);
  }
  return out;
}

class DataParallel : public TrainingSetup {
 public:
  explicit DataParallel(const ParallelOptions& o) : o_(o) {}

  bool AllocateParameter(StepState& s, TensorId t) override {
    if (o_.rank == 0) return false;
    // Not on this device between steps: the replica is made in forward.
    s.storage[t] = s.ledger.Alloc(0, s.g.tensors[t].name + " (replica)", Category::kParameter);
    return true;
  }

  void OnSetup(StepState& s) override {
    if (o_.rank != 0) return;
    // The whole batch is on device 0; the graph's inputs are its chunk 0.
    int64_t chunk = 0;
    for (TensorId t : s.g.inputs) chunk += s.bound.metas[t].bytes();
    const int64_t batch = ChunkBatch(s);
    if (batch > 0 && o_.dp_total_batch > batch) {
      const int64_t rest = chunk / batch * (o_.dp_total_batch - batch);
      if (rest > 0) rest_ = s.ledger.Alloc(rest, "DataParallel: the rest of the batch (other devices' chunks)", Category::kInput);
    }
  }

  void OnOptimizerParams(const StepState&, std::vector<OptParam>* ps) override {
    if (o_.rank != 0) ps->clear();  // the optimizer runs on device 0
  }

  void BeforeForwardOp(StepState& s, OpId o, ForwardOpPolicy*) override {
    if (o != 0 || o_.rank == 0) return;
    std::vector<TensorId> states(s.g.parameters.begin(), s.g.parameters.end());
    for (int64_t b : Buckets(s, states))
      replica_.push_back(s.ledger.Alloc(b, "DataParallel replica parameters (flat)", Category::kParameter));
    for (int64_t b : Buckets(s, s.g.buffers))
      replica_.push_back(s.ledger.Alloc(b, "DataParallel replica buffers (flat)", Category::kParameter));
  }

  void AfterForwardOp(StepState& s, OpId o) override {
    if (o_.rank != 0) return;
    // Gather: the outputs of every device concatenated on device 0 (the loss is computed on it).
    for (TensorId t : s.g.outputs)
      if (s.g.tensors[t].producer == o && gathered_ == kNoStorage && ChunkBatch(s) > 0) {
        const int64_t rest = s.bound.metas[t].bytes() / ChunkBatch(s) * (o_.dp_total_batch - ChunkBatch(s));
        if (rest > 0) gathered_ = s.ledger.Alloc(rest, "DataParallel: gathered outputs of the other devices", Category::kActivation);
      }
    if (!InLoss(s, o)) return;
    for (TensorId t : s.g.ops[o].outputs) {
      const int64_t rest = Rest(s, s.bound.metas[t]);
      if (rest > 0)
        loss_fwd_.push_back({t, s.ledger.Alloc(rest, "DataParallel: whole-batch loss, other devices' part of " +
                                                         s.g.tensors[t].name, Category::kActivation)});
    }
  }

  /// The forward is over: the loss tensors no node saved died in it.
  void AfterForwardPass(StepState& s) override {
    for (const auto& [t, extra] : loss_fwd_) {
      bool saved = false;
      for (OpId o = 0; o < s.g.ops.size() && !saved; ++o)
        if (InLoss(s, o))
          saved = std::find(s.nodes[o].saved.begin(), s.nodes[o].saved.end(), s.storage[t]) != s.nodes[o].saved.end();
      if (saved)
        free_after_.emplace(s.g.tensors[t].producer, extra);
      else
        s.ledger.Unref(extra);
    }
    loss_fwd_.clear();
  }

  /// The loss's backward nodes make whole-batch grads, down to the gathered outputs'.
  void OnInputGrad(StepState& s, OpId o, size_t i, Grad* grad) override {
    if (o_.rank != 0 || !grad->defined() || !InLoss(s, o)) return;
    const int64_t rest = Rest(s, grad->meta);
    if (rest <= 0) return;
    const TensorId t = s.g.ops[o].inputs[i];
    free_after_.emplace(s.g.tensors[t].producer,
                        s.ledger.Alloc(rest, "DataParallel: whole-batch grad, other devices' part of " + s.g.tensors[t].name,
                                       Category::kGradient));
  }

  void AfterBackwardNode(StepState& s, OpId o) override {
    auto [lo, hi] = free_after_.equal_range(o);
    for (auto it = lo; it != hi; ++it) s.ledger.Unref(it->second);
    free_after_.erase(lo, hi);
  }

  void AfterBackwardPass(StepState& s) override {
    for (const auto& [o, extra] : free_after_) s.ledger.Unref(extra);
    free_after_.clear();
    // BroadcastBackward: reduce_add_coalesced of the replicas' parameter grads onto device 0.
    std::vector<TensorId> with_grad;
    for (size_t k = 0; k < s.g.parameters.size(); ++k)
      if (s.param_grad[k] != kNoStorage) with_grad.push_back(s.g.parameters[k]);
    std::vector<StorageId> flats;
    for (int64_t b : Buckets(s, with_grad)) {
      flats.push_back(s.ledger.Alloc(b, "DataParallel reduce_add flat grads", Category::kGradient));
      if (o_.rank != 0) continue;
      for (int d = 1; d < o_.world; ++d)  // each other device's flat, copied here and added
        s.ledger.Unref(s.ledger.Alloc(b, "DataParallel reduce_add: copy from another device", Category::kTemporary));
    }
    for (size_t k = 0; k < s.g.parameters.size(); ++k)
      if (s.param_grad[k] != kNoStorage) {
        s.ledger.Unref(s.param_grad[k]);  // BroadcastBackward's input buffer released
        s.param_grad[k] = kNoStorage;
        if (o_.rank == 0) grads_.push_back(k);
      }
    for (uint32_t k : grads_) {  // device 0's AccumulateGrad copies its slice (shared storage)
      TensorId t = s.g.parameters[k];
      s.param_grad[k] = s.ledger.Alloc(s.bound.metas[t].bytes(), s.g.tensors[t].name + ".grad", Category::kGradient);
    }
    grads_.clear();
    for (StorageId f : flats) s.ledger.Unref(f);
    for (StorageId r : replica_) s.ledger.Unref(r);
    replica_.clear();
    if (gathered_ != kNoStorage) s.ledger.Unref(gathered_);
    gathered_ = kNoStorage;
  }

 private:
  static int64_t ChunkBatch(const StepState& s) {
    uint32_t sym = s.g.FindSymbol("batch");
    return sym == kNone ? 0 : s.bound.bindings[sym].value_or(0);
  }

  /// Whether op |o| is part of the loss: it reads a model output or a tensor made from one.
  bool InLoss(const StepState& s, OpId o) {
    if (in_loss_.empty()) {
      std::vector<bool> derived(s.g.tensors.size(), false);
      for (TensorId t : s.g.outputs) derived[t] = true;
      in_loss_.assign(s.g.ops.size(), false);
      for (OpId k = 0; k < s.g.ops.size(); ++k) {
        for (TensorId t : s.g.ops[k].inputs) in_loss_[k] = in_loss_[k] || derived[t];
        if (in_loss_[k])
          for (TensorId t : s.g.ops[k].outputs) derived[t] = true;
      }
    }
    return in_loss_[o];
  }

  /// The other devices' part of a device-0 loss tensor: its bytes scaled from the chunk to the
  /// whole batch when its leading dimension is the chunk (Gather concatenates along dim 0).
  int64_t Rest(const StepState& s, const TensorMeta& m) const {
    const int64_t chunk = ChunkBatch(s);
    if (chunk <= 0 || m.sizes.empty() || m.sizes[0] != chunk || o_.dp_total_batch <= chunk) return 0;
    return m.bytes() / chunk * (o_.dp_total_batch - chunk);
  }

  ParallelOptions o_;
  std::vector<bool> in_loss_;                          ///< per op: part of the loss
  std::vector<std::pair<TensorId, StorageId>> loss_fwd_;  ///< loss tensors' whole-batch parts, this forward
  std::multimap<OpId, StorageId> free_after_;          ///< freed after that op's backward node
  StorageId rest_ = kNoStorage, gathered_ = kNoStorage;
  std::vector<StorageId> replica_;
  std::vector<uint32_t> grads_;
};

}  // namespace

int64_t DataParallelChunk(int64_t batch, int world, int device) {
  const int64_t chunk = (batch + world - 1) / std::max(world, 1);
  return std::clamp<int64_t>(batch - device * chunk, 0, chunk);
}

std::unique_ptr<TrainingSetup> MakeDataParallel(const ParallelOptions& options) {
  return std::make_unique<DataParallel>(options);
}

}  // namespace memsim
