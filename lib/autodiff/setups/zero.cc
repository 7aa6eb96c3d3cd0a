// ZeRO: the optimizer state (stage 1), and the gradients (stage 2) partitioned over the ranks;
// the step of one rank (Note [ZeRO] in docs/op-rules.md).
// - whole parameters (Profile::zero_whole_parameters, the 1.13 CPU profile): PyTorch's
//   ZeroRedundancyOptimizer under DDP. Each rank's local optimizer steps the parameters the
//   greedy partition gives it (largest first, to the least loaded rank), in that order; its
//   step() runs inside a record_function of its own. The updated parameters are broadcast in
//   place.
// - flat partitions (DeepSpeed, the cuda profile): the trainable parameters of each dtype are
//   flattened, padded to a multiple of 2·world elements and split evenly; the rank keeps an fp32
//   copy of its partition (single_partition_of_fp32_groups) and the optimizer state of that
//   partition only. Stage 1: the gradients stay whole until the step, which flattens this
//   rank's part into a partition-sized fp32 grad. Stage 2: each gradient is copied into the
//   reduce bucket (contiguous_gradients: an ipg buffer of reduce_bucket_size = 5e8 elements
//   whatever the model's size, for the backward pass) as soon as AccumulateGrad has made it, and freed; the reduce-scatter leaves this
//   rank's part in a partition-sized gradient buffer (stage 3: one buffer for the whole run).
// - optimizer.step() (stages 1-3 on the GPU): the rank's gradients are flattened into one
//   partition-sized tensor in the parameters' dtype, converted to fp32 for the master partition
//   (.to(fp32): a second copy when the parameters are fp16/bf16), then the parameters' grads
//   (stage 1) or the gradient partition (stage 2) are freed; the fp32 grad dies after the step.
// - mixed precision (--dtype fp16|bf16: DeepSpeed's fp16/bf16 config, the module converted):
//   parameters, their grads, the ipg bucket and the gradient partition in the low dtype; the
//   master partition, its grad and the optimizer state in fp32 (Note [ZeRO mixed precision]).
#include "lib/autodiff/setups/zero.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lib/autodiff/setups/setups.h"
#include "lib/autodiff/setups/sharded.h"
#include "lib/autodiff/state.h"

namespace memsim {

std::vector<std::vector<size_t>> GreedyPartition(const std::vector<int64_t>& numels, int world) {
  std::vector<size_t> order(numels.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return numels[a] > numels[b]; });
  std::vector<std::vector<size_t>> parts(std::max(world, 1));
  std::vector<int64_t> sizes(parts.size(), 0);
  for (size_t i : order) {
    size_t r = std::min_element(sizes.begin(), sizes.end()) - sizes.begin();
    parts[r].push_back(i);
    sizes[r] += numels[i];
  }
  return parts;
}

int64_t FlatPartitionNumel(int64_t numel, int world) {
  const int64_t align = 2 * int64_t{std::max(world, 1)};
  const int64_t padded = (numel + align - 1) / align * align;
  return padded / std::max(world, 1);
}

namespace {

/// The ipg buffers of |o|: reduce_bucket_size elements each whatever the model's size
/// (torch.empty(int(self.reduce_bucket_size)) in stage_1_and_2.py's backward(), a second one
/// with overlap_comm; stage3.py's __ipg_bucket_flat_buffer, one), default 5e8.
int IpgBuffers(const ParallelOptions& o) {
  return o.zero_stage == 2 && o.zero_overlap_comm.value_or(false) ? 2 : 1;
}

class Zero : public TrainingSetup {
 public:
  explicit Zero(const ParallelOptions& o) : o_(o), offload_(!o.offload.empty()) {}

  void OnSetup(StepState& s) override {
    if (s.profile.zero_whole_parameters) return;
    MakeGroups(s);
    for (auto& [dtype, grp] : groups_) {
      if (offload_) {  // fp32 partition, optimizer state and grad partition in host memory
        s.ledger.AddHostBytes(grp.part_numel * 4 * (2 + s.cfg.optimizer.states));
        // Stage 3 still makes its ipg bucket on the GPU; its gradient partition is on the host.
        if (o_.zero_stage == 3) {
          AllocBuckets(s, &grp);
          s.ledger.AddHostBytes(grp.part_numel * grp.elem);
        }
        continue;
      }
      grp.master = s.ledger.Alloc(grp.part_numel * 4, "ZeRO fp32 partition (master)", Category::kOptimizerState);
      // DeepSpeed creates the optimizer state in its constructor (initialize_optimizer_states);
      // for a steady step the step engine has made it already.
      if (s.cfg.first_step)
        CreateResidentState(s.cfg.optimizer, s.profile, /*first_step=*/false, {Partition(grp)}, &s.ledger, &s.states);
      if (o_.zero_stage == 3) {  // stage 3: the ipg bucket and the gradient partitions, from the start
        AllocBuckets(s, &grp);
        grp.partition_grad = s.ledger.Alloc(grp.part_numel * grp.elem, "ZeRO gradient partition", Category::kGradient);
      }
    }
  }

  void OnOptimizerParams(const StepState& s, std::vector<OptParam>* ps) override {
    if (s.profile.zero_whole_parameters) {
      std::vector<int64_t> numels;
      for (const OptParam& p : *ps) numels.push_back(p.bytes);  // one dtype: bytes order = numel order
      std::vector<OptParam> mine;
      const std::vector<std::vector<size_t>> parts = GreedyPartition(numels, o_.world);
      for (size_t i : parts[o_.rank]) mine.push_back((*ps)[i]);
      *ps = std::move(mine);
      return;
    }
    MakeGroups(s);
    ps->clear();
    if (offload_) return;  // DeepSpeedCPUAdam steps the host partition
    // In the step the state exists (made in the constructor) and DeepSpeed's FusedAdam allocates
    // no temporaries: the partition is shown to the optimizer without a grad.
    const bool stepping = s.phase == Phase::kOptimizer;
    for (auto& [dtype, grp] : groups_) {
      OptParam p = Partition(grp);
      if (stepping) p.grad = kNoStorage;
      ps->push_back(p);
    }
  }

  void BeforeBackwardNode(StepState& s, OpId) override {
    // Stage 2: backward() makes the ipg buffer before loss.backward() runs.
    if (o_.zero_stage != 2 || s.profile.zero_whole_parameters) return;
    for (auto& [dtype, grp] : groups_)
      if (grp.bucket == kNoStorage) AllocBuckets(s, &grp);
  }

  void OnGradReady(StepState& s, uint32_t k) override {
    if (o_.zero_stage < 2 || s.param_grad[k] == kNoStorage) return;
    Group& grp = groups_[static_cast<int>(s.bound.metas[s.g.parameters[k]].dtype)];
    if (grp.partition_grad == kNoStorage && !offload_)
      grp.partition_grad = s.ledger.Alloc(grp.part_numel * grp.elem, "ZeRO gradient partition", Category::kGradient);
    s.ledger.Unref(s.param_grad[k]);  // copied into the bucket; param.grad = None
    s.param_grad[k] = kNoStorage;
  }

  void AfterBackwardPass(StepState& s) override {
    if (o_.zero_stage == 3) return;  // stage 3 keeps its bucket
    for (auto& [dtype, grp] : groups_)
      for (StorageId* b : {&grp.bucket, &grp.bucket2})
        if (*b != kNoStorage) {
          s.ledger.Unref(*b);
          *b = kNoStorage;
        }
  }

  void BeforeOptimizerStep(StepState& s) override {
    RecordFunctionScratch(s);  // ZeroRedundancyOptimizer.step (CPU) has its own record_function
    if (s.profile.zero_whole_parameters || offload_) return;
    for (auto& [dtype, grp] : groups_) {
      if (o_.zero_stage == 1) FreeGrads(s, grp, /*in_partition=*/false);  // params_not_in_partition
      // flatten(averaged_gradients).to(fp32): the flat copy in the parameters' dtype, then
      // (fp16/bf16) its fp32 conversion, the flat copy dropped.
      grp.grad = s.ledger.Alloc(grp.part_numel * grp.elem, "ZeRO flat gradient partition", Category::kGradient);
      if (grp.elem != 4) {
        StorageId fp32 = s.ledger.Alloc(grp.part_numel * 4, "ZeRO fp32 gradient partition", Category::kGradient);
        s.ledger.Unref(grp.grad);
        grp.grad = fp32;
      }
      if (o_.zero_stage == 1) FreeGrads(s, grp, /*in_partition=*/true);
      if (o_.zero_stage == 2 && grp.partition_grad != kNoStorage) {  // free_grad_in_param_list
        s.ledger.Unref(grp.partition_grad);
        grp.partition_grad = kNoStorage;
      }
    }
  }

  void AfterOptimizerStep(StepState& s) override {
    for (auto& [dtype, grp] : groups_)
      if (grp.grad != kNoStorage) {
        s.ledger.Unref(grp.grad);
        grp.grad = kNoStorage;
      }
  }

 private:
  /// One flat group per dtype of the trainable parameters (made once). Stages 1-2: the
  /// flattened group padded to 2·world; stage 3: each parameter's own partition.
  void MakeGroups(const StepState& s) {
    if (!groups_.empty()) return;
    const int64_t world = std::max(o_.world, 1);
    for (size_t k = 0; k < s.g.parameters.size(); ++k) {
      TensorId t = s.g.parameters[k];
      if (!s.rg[t]) continue;
      Group& grp = groups_[static_cast<int>(s.bound.metas[t].dtype)];
      grp.elem = ElementSize(s.bound.metas[t].dtype);
      grp.members.push_back({static_cast<uint32_t>(k), grp.numel});
      grp.numel += s.bound.metas[t].numel();
      grp.part_numel += (s.bound.metas[t].numel() + world - 1) / world;
    }
    if (o_.zero_stage < 3)
      for (auto& [dtype, grp] : groups_) grp.part_numel = FlatPartitionNumel(grp.numel, o_.world);
  }

  struct Group {
    int64_t elem = 4, numel = 0, part_numel = 0;
    std::vector<std::pair<uint32_t, int64_t>> members;  ///< (Graph::parameters index, flat offset)
    StorageId master = kNoStorage, bucket = kNoStorage, bucket2 = kNoStorage, partition_grad = kNoStorage, grad = kNoStorage;
  };

  /// Stage 1: frees the .grad of the group's parameters inside (or outside) this rank's range
  /// of the flat group.
  void FreeGrads(StepState& s, const Group& grp, bool in_partition) {
    const int64_t lo = grp.part_numel * o_.rank, hi = lo + grp.part_numel;
    for (const auto& [k, offset] : grp.members) {
      const int64_t end = offset + s.bound.metas[s.g.parameters[k]].numel();
      const bool inside = offset < hi && end > lo;
      if (inside != in_partition || s.param_grad[k] == kNoStorage) continue;
      s.ledger.Unref(s.param_grad[k]);
      s.param_grad[k] = kNoStorage;
    }
  }

  void AllocBuckets(StepState& s, Group* grp) const {
    const int64_t bytes = o_.zero_bucket_elements * grp->elem;
    grp->bucket = s.ledger.Alloc(bytes, "ZeRO reduce bucket (ipg)", Category::kGradient);
    if (IpgBuffers(o_) == 2) grp->bucket2 = s.ledger.Alloc(bytes, "ZeRO reduce bucket (ipg, overlap_comm)", Category::kGradient);
  }

  static OptParam Partition(const Group& grp) {
    return OptParam{"ZeRO fp32 partition", grp.part_numel * 4, grp.grad != kNoStorage ? grp.grad : grp.partition_grad};
  }

  ParallelOptions o_;
  bool offload_;
  std::map<int, Group> groups_;  ///< per dtype (DeepSpeed's flat groups)
};

}  // namespace

std::unique_ptr<TrainingSetup> MakeZero(const ParallelOptions& options) { return std::make_unique<Zero>(options); }

std::unique_ptr<TrainingSetup> MakeZero3Params(const ParallelOptions& o) {
  ShardPolicy p;
  p.label = "ZeRO-3";
  p.world = o.world;
  p.persistence_threshold = o.zero_persistence_threshold;  // stage3_param_persistence_threshold
  p.offload_params = o.offload == "params";
  return MakeShardedParams(p, {});
}

}  // namespace memsim
