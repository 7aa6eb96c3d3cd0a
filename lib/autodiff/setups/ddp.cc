// DistributedDataParallel (torch.nn.parallel.DistributedDataParallel, find_unused_parameters=False,
// broadcast_buffers=True), the step of one rank (Note [DDP] in docs/op-rules.md):
// - construction (the setup phase): _verify_param_shape_across_processes (the parameter count
//   all-gathered, then 2·dim int64 of sizes and strides per parameter, broadcast), then
//   _sync_module_states: every parameter and buffer broadcast from rank 0 through flat
//   per-dtype buckets of up to 250 MiB, at most two in flight; then the Reducer's gradient
//   buckets. The first iteration has one bucket per dtype (bucket_size_limits = [sys.maxsize]
//   until the buckets are rebuilt in gradient-ready order after it); later iterations use the
//   rebuilt buckets: 1 MiB first, then --bucket-cap-mb, in reverse registration order.
// - forward: record_function("DistributedDataParallel.forward"), then the buffers broadcast
//   from rank 0 through flat per-dtype buckets (freed at once).
// - backward: each parameter's AccumulateGrad hook copies the grad, times 1/world (a wrapped
//   double scalar and its float copy on CPU), into its bucket view; with
//   gradient_as_bucket_view the .grad then becomes that view and the grad AccumulateGrad made
//   is freed. The all-reduce runs in place on the bucket.
#include "lib/autodiff/setups/ddp.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <string>

#include "lib/autodiff/setups/setups.h"
#include "lib/autodiff/state.h"

namespace memsim {

std::vector<std::vector<size_t>> ComputeBucketAssignmentBySize(const std::vector<BucketItem>& items,
                                                               const std::vector<int64_t>& limits,
                                                               bool sort_by_min_index) {
  struct Open {
    std::vector<size_t> indices;
    int64_t size = 0;
    size_t limit = 0;  ///< index into |limits|
  };
  std::map<int, Open> open;
  std::vector<std::vector<size_t>> result;
  for (size_t i = 0; i < items.size(); ++i) {
    Open& b = open[items[i].key];
    b.indices.push_back(i);
    b.size += items[i].bytes;
    const int64_t limit = limits.empty() ? std::numeric_limits<int64_t>::max() : limits[b.limit];
    if (b.size >= limit) {
      result.push_back(std::move(b.indices));
      const size_t next = std::min(b.limit + 1, limits.empty() ? size_t{0} : limits.size() - 1);
      b = Open{};
      b.limit = next;
    }
  }
  for (auto& [key, b] : open)
    if (!b.indices.empty()) result.push_back(std::move(b.indices));
  if (sort_by_min_index)
    std::stable_sort(result.begin(), result.end(),
                     [](const auto& a, const auto& b) { return a.front() < b.front(); });
  return result;
}

namespace {

/// dist._broadcast_coalesced: per-dtype flat buckets of up to 250 MiB, at most two in flight;
/// each flat copy is freed when its broadcast is finished.
void BroadcastCoalesced(StepState& s, const std::vector<TensorId>& tensors, const std::string& what) {
  std::vector<BucketItem> items;
  for (TensorId t : tensors) items.push_back({s.bound.metas[t].bytes(), static_cast<int>(s.bound.metas[t].dtype)});
  std::deque<StorageId> in_flight;
  for (const auto& bucket : ComputeBucketAssignmentBySize(items, {kBroadcastBucketBytes}, true)) {
    int64_t bytes = 0;
    for (size_t i : bucket) bytes += items[i].bytes;
    if (in_flight.size() >= 2) {
      s.ledger.Unref(in_flight.front());
      in_flight.pop_front();
    }
    in_flight.push_back(s.ledger.Alloc(bytes, "DDP " + what + " broadcast (flat)", Category::kTemporary));
  }
  for (StorageId f : in_flight) s.ledger.Unref(f);
}

class Ddp : public TrainingSetup {
 public:
  explicit Ddp(const ParallelOptions& o) : o_(o) {}

  void OnSetup(StepState& s) override {
    for (TensorId t : s.g.parameters)
      if (s.rg[t]) params_.push_back(t);
    VerifyParamShapes(s);
    std::vector<TensorId> states(s.g.parameters.begin(), s.g.parameters.end());
    states.insert(states.end(), s.g.buffers.begin(), s.g.buffers.end());
    BroadcastCoalesced(s, states, "module states");
    MakeBuckets(s);
  }

  void BeforeForwardOp(StepState& s, OpId o, ForwardOpPolicy*) override {
    if (o != 0) return;
    RecordFunctionScratch(s);
    if (!s.g.buffers.empty()) BroadcastCoalesced(s, s.g.buffers, "buffers");
  }

  void OnGradReady(StepState& s, uint32_t k) override {
    if (bucket_of_[k] < 0) return;
    StorageId bucket = buckets_[bucket_of_[k]];
    if (s.param_grad[k] == bucket) return;  // already the bucket view: divided in place
    // mul_out(bucket_view, grad, wrapped_scalar_tensor(1/world)): the double scalar and its
    // float copy are CPU tensors (device memory on the CPU profile only).
    if (s.profile.scalar_operand_bytes > 0) {
      StorageId d = s.ledger.Alloc(s.profile.scalar_operand_bytes, "DDP 1/world scalar", Category::kTemporary);
      StorageId f = s.ledger.Alloc(ElementSize(s.bound.metas[s.g.parameters[k]].dtype), "DDP 1/world scalar (cast)",
                                   Category::kTemporary);
      s.ledger.Unref(f);
      s.ledger.Unref(d);
    }
    if (!o_.gradient_as_bucket_view || s.param_grad[k] == kNoStorage) return;
    s.ledger.Ref(bucket);
    s.ledger.Unref(s.param_grad[k]);  // .grad = bucket view
    s.param_grad[k] = bucket;
  }

 private:
  /// _verify_param_shape_across_processes: the parameter count (one int64, all-gathered into
  /// one per rank through a flat copy), then the 2·dim sizes and strides of every parameter.
  void VerifyParamShapes(StepState& s) {
    int64_t dims = 0;
    for (TensorId t : params_) dims += s.bound.metas[t].dim();
    std::vector<StorageId> counts;
    for (int r = 0; r <= o_.world; ++r) counts.push_back(s.ledger.Alloc(8, "DDP parameter count", Category::kTemporary));
    s.ledger.Unref(s.ledger.Alloc(8 * int64_t{o_.world}, "DDP parameter count (gathered)", Category::kTemporary));
    std::vector<StorageId> meta;
    for (int i = 0; i < 3; ++i) meta.push_back(s.ledger.Alloc(16 * dims, "DDP parameter shapes", Category::kTemporary));
    for (auto it = meta.rbegin(); it != meta.rend(); ++it) s.ledger.Unref(*it);
    for (size_t i = 1; i < counts.size(); ++i) s.ledger.Unref(counts[i]);
    s.ledger.Unref(counts[0]);
  }

  /// The Reducer's buckets: bucket.gradients, one flat tensor per bucket.
  void MakeBuckets(StepState& s) {
    std::vector<BucketItem> items;
    std::vector<uint32_t> index;  // item -> Graph::parameters index
    auto add = [&](size_t k) {
      TensorId t = s.g.parameters[k];
      if (!s.rg[t]) return;
      items.push_back({s.bound.metas[t].bytes(), static_cast<int>(s.bound.metas[t].dtype)});
      index.push_back(static_cast<uint32_t>(k));
    };
    std::vector<std::vector<size_t>> assignment;
    if (s.cfg.first_step) {
      for (size_t k = 0; k < s.g.parameters.size(); ++k) add(k);
      assignment = ComputeBucketAssignmentBySize(items, {std::numeric_limits<int64_t>::max()}, true);
      std::reverse(assignment.begin(), assignment.end());
    } else {
      for (size_t k = s.g.parameters.size(); k-- > 0;) add(k);
      const int64_t cap = static_cast<int64_t>(o_.bucket_cap_mb * 1024 * 1024);
      assignment = ComputeBucketAssignmentBySize(items, {kDefaultFirstBucketBytes, std::max<int64_t>(cap, 1)}, false);
    }
    bucket_of_.assign(s.g.parameters.size(), -1);
    for (const auto& bucket : assignment) {
      int64_t bytes = 0;
      for (size_t i : bucket) {
        bytes += items[i].bytes;
        bucket_of_[index[i]] = static_cast<int>(buckets_.size());
      }
      buckets_.push_back(s.ledger.Alloc(bytes, "DDP bucket " + std::to_string(buckets_.size()), Category::kGradient));
    }
  }

  ParallelOptions o_;
  std::vector<TensorId> params_;
  std::vector<StorageId> buckets_;
  std::vector<int> bucket_of_;  ///< per Graph::parameters entry: its bucket, or -1
};

}  // namespace

std::unique_ptr<TrainingSetup> MakeDdp(const ParallelOptions& options) { return std::make_unique<Ddp>(options); }

}  // namespace memsim
