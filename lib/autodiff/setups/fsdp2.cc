// FSDP2, torch.distributed.fsdp.fully_shard (torch/distributed/fsdp/_fully_shard/), the step of
// one rank (Note [FSDP2] in docs/parallel.md):
// - fully_shard (the setup phase, once per group: each wrapped module, then the root): every
//   parameter's padded dim-0 shard allocated (new_zeros), then the group's original parameters
//   freed; on the host, the DeviceMesh's rank tensors with it.
// - pre_forward of a group: the all-gather output (world × the group's padded shards, one flat
//   buffer; the rank's input is its slice: all_gather_copy_in), then the copy-out into one
//   buffer per parameter (its padded unsharded size); the all-gather output is kept until the
//   next group's copy-out (implicit forward overlap), the last one until the root's post_forward.
// - post_forward: reshard_after_forward frees the unsharded parameters (their storage resized
//   to 0: autograd's references keep nothing).
// - pre_backward (the first backward node of the group): unshard again if resharded (the
//   all-gather output freed right after the copy-out), then the implicit prefetch: the
//   all-gather of the group whose post_forward came before this one's.
// - post_backward (after the group's last backward node): reshard, the previous reduce-scatter
//   input freed, the unsharded grads copied into a new reduce-scatter input (world × shards),
//   freed (the last one when foreach_reduce returns), the reduce-scatter output becomes the
//   sharded grads (views); the last input freed by the root's final callback.
// - MixedPrecisionPolicy(param_dtype, reduce_dtype): the all-gather reads a param_dtype copy
//   of the shards (one flat foreach copy), the unsharded parameters and grads are param_dtype,
//   the reduce-scatter runs in reduce_dtype.
// - The optimizer steps the sharded parameters (their unpadded local tensors).
// - torchao's float8 all-gather (Float8LinearConfig(enable_fsdp_float8_all_gather=True), the
//   fp8_linear ops whose "weight" is "float8"): fsdp_pre_all_gather casts each such weight's
//   shard to float8 before the all-gather, so the all-gather moves and the unsharded weight
//   holds one byte per element (Note [FP8 training]).
#include "lib/autodiff/setups/fsdp2.h"

#include <algorithm>
#include <utility>

#include "lib/autodiff/setups/setups.h"
#include "lib/autodiff/setups/sharded.h"
#include "lib/autodiff/state.h"

namespace memsim {

namespace {

/// FSDP2 on CUDA allocates the all-gather's input and output under its all_gather stream and
/// the reduce-scatter's output (and the sharded grads cast from it) under its reduce_scatter
/// stream (_fsdp_collectives.py: foreach_all_gather, foreach_reduce); the caching allocator keeps
/// their blocks in those streams' pools (Note [Side streams] in docs/allocator.md). Host
/// collectives (gloo, the CPU profile) have no streams.
class SideStream {
 public:
  SideStream(StepState& s, uint8_t stream) : s_(s) {
    if (s.profile.cuda) s.ledger.set_side_stream(stream);
  }
  ~SideStream() { s_.ledger.set_side_stream(0); }
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

 private:
  StepState& s_;
};

class Fsdp2 : public TrainingSetup {
 public:
  explicit Fsdp2(const ParallelOptions& o)
      : o_(o),
        world_(std::max(o.mesh.dp_shard, 1) * std::max(o.mesh.cp, 1)),
        replicas_(std::max(o.mesh.dp_replicate, 1)),
        offload_(o.offload == "params") {}

  bool AllocateParameter(StepState& s, TensorId t) override {
    if (groups_.empty()) Init(s);  // before the optimizer state of a steady step asks for the shards
    // The 2-D mesh: tensor parallelism's setup builds its planned parameters (full, then its
    // shards); fully_shard then shards the rank's local tensors (Note [FSDP2]).
    if (o_.meta_init) return MaterializeShard(s, t);
    for (const Graph::TpShard& sh : s.g.tp_shards)
      if (sh.param == t) return false;
    // So does expert parallelism's setup with the experts' weights (torchtitan: EP, then FSDP).
    if (std::find(s.g.ep_shards.begin(), s.g.ep_shards.end(), t) != s.g.ep_shards.end()) return false;
    // The model is built in its own dtype (MixedPrecisionPolicy casts only the unsharded copy).
    AllocOwnDtype(s, t);
    return true;
  }

  bool AllocateInput(StepState& s, TensorId t) override {
    if (!IsCastInput(s, t)) return false;
    user_inputs_.push_back(s.ledger.Alloc(s.bound.metas[t].numel() * ElementSize(s.g.tensors[t].dtype), s.g.tensors[t].name,
                                          Category::kInput));
    return true;
  }

  void OnSetupBatch(StepState& s) override {
    if (groups_.empty()) Init(s);
    for (size_t u = 0; u < groups_.size() && !s.cfg.pipeline; ++u) FullyShard(s, u);
  }

  /// With pp: fully_shard on local stage |stage|'s blocks, then on its model part.
  void OnParallelizeStage(StepState& s, int stage) override {
    for (size_t u = 0; u < groups_.size(); ++u)
      if (groups_[u].stage == stage) FullyShard(s, u);
  }

  void BeforeForwardOp(StepState& s, OpId o, ForwardOpPolicy*) override {
    if (o == groups_.back().first && !s.cfg.pipeline)  // the root's pre_forward: cast_forward_inputs
      for (TensorId t : s.g.inputs)
        if (IsCastInput(s, t)) s.storage[t] = s.ledger.Alloc(s.bound.metas[t].bytes(), s.g.tensors[t].name + " (param_dtype)", Category::kInput);
    for (size_t u = groups_.size(); u-- > 0;)  // the root's pre_forward first
      if (groups_[u].first == o && CallBegin(u) == u) PreForward(s, u);
  }

  void AfterForwardOp(StepState& s, OpId o) override {
    for (TensorId t : s.g.inputs)  // the cast batch: the forward's arguments let go of it
      if (IsCastInput(s, t) && s.bound.last_use[t] == o) s.ledger.Unref(s.storage[t]);
    for (size_t u = 0; u < groups_.size(); ++u)
      if (groups_[u].last == o) {
        if (o_.fsdp2_post_forward_world > 1) ReshardPostForward(s, u);
        else if (o_.fsdp2_reshard_after_forward) Reshard(s, u);
        if (!groups_[u].params.empty()) post_forward_order_.push_back(u);
        if (groups_[u].root && CallEnd(u) == u + 1) Free(s, &held_all_gather_);  // the root's post_forward
      }
  }

  void BeforeBackwardNode(StepState& s, OpId o) override {
    if (s.grad_pass != nullptr && s.grad_pass->weights) return;  // stage_backward_weight: no module hooks
    const int u = group_of_op_[o];
    if (u < 0 || pre_backward_done_[u]) return;
    pending_[u] = 0;
    for (OpId k : groups_[u].ops) pending_[u] += s.nodes[k].exists && s.nodes[k].reachable;
    for (size_t v = u; v < CallEnd(u); ++v) {  // each group's pre_backward, in order
      pre_backward_done_[v] = true;
      if (groups_[v].params.empty()) continue;
      Unshard(s, v);
      CopyOut(s, v, /*forward=*/false);
    }
    if (CallEnd(u) > static_cast<size_t>(u) + 1) return PrefetchPreviousCall(s, u + 1);
    if (groups_[u].params.empty()) return;
    if (s.g.ep_degree > 1 && !groups_[u].root && !Nested(u) && Apart()) {
      // set_modules_to_backward_prefetch([previous block, its experts]): no default prefetch
      for (size_t v : NeighbourBlock(groups_, nested_, u, /*next=*/false)) Unshard(s, v);
      return;
    }
    // _backward_prefetch: the group whose post_forward preceded this one's last (its index popped).
    auto it = std::find(post_forward_order_.rbegin(), post_forward_order_.rend(), static_cast<size_t>(u));
    if (it == post_forward_order_.rend()) return;
    const auto at = post_forward_order_.begin() + (post_forward_order_.rend() - it - 1);
    if (at != post_forward_order_.begin()) Unshard(s, *(at - 1));
    if (s.cfg.pipeline) post_forward_order_.erase(at);  // _post_forward_indices.pop(), kept across microbatches
  }

  void AfterBackwardNode(StepState& s, OpId o) override {
    if (s.grad_pass != nullptr && s.grad_pass->weights) return;
    const int u = group_of_op_[o];
    // A stage module's post_backward waits for the grad of its input (the recv buffer), the end
    // of the stage's backward (RegisterPostBackwardFunction on the forward's inputs).
    if (u >= 0 && s.cfg.pipeline && groups_[u].root) return;
    if (u < 0 || !pre_backward_done_[u] || post_backward_done_[u] || --pending_[u] != 0) return;
    // Each group's RegisterPostBackwardFunction wraps the inputs the one before it returned: the
    // last group's post_backward runs first.
    for (size_t v = CallEnd(u); v-- > static_cast<size_t>(u);) PostBackward(s, v);
  }

  void AfterBackwardPass(StepState& s) override {
    if (s.cfg.pipeline) return MicrobatchCallback(s);

    for (size_t u = groups_.size(); u-- > 0;)  // the root's final callback: groups not yet reduced
      if (!post_backward_done_[u]) PostBackward(s, u);
    FreeAll(s, &held_reduce_scatter_);  // reduce_scatter_states.clear()
    for (size_t u = 0; u < groups_.size(); ++u) Free(s, &all_gather_[u]), issued_[u] = false;
    std::fill(pre_backward_done_.begin(), pre_backward_done_.end(), false);
    std::fill(post_backward_done_.begin(), post_backward_done_.end(), false);
    post_forward_order_.clear();
  }

  /// A split backward's stage_backward_input (Note [Pipeline parallel]): its engine run ends with
  /// the root's final callback, as a whole backward does; the weight passes run no FSDP hook, so
  /// under mixed precision each microbatch's bf16 weight grads wait for the next input pass's
  /// post_backward (or perform_reduce_grad) to be accumulated in reduce_dtype.
  void AfterGradPass(StepState& s) override {
    if (s.cfg.pipeline && !s.grad_pass->weights) MicrobatchCallback(s);
  }

  /// A pipeline microbatch's final callback, not the last backward: no sync.
  void MicrobatchCallback(StepState& s) {
    for (size_t u = 0; u < groups_.size(); ++u)
      if (groups_[u].root && pre_backward_done_[u] && !post_backward_done_[u]) PostBackward(s, u);
    std::fill(pre_backward_done_.begin(), pre_backward_done_.end(), false);
    std::fill(post_backward_done_.begin(), post_backward_done_.end(), false);
  }

  /// perform_reduce_grad: set_requires_gradient_sync(True), set_reshard_after_backward(True), then
  /// post_backward of every group of the stage's states (root first, then its blocks, as
  /// _state_ctx.all_states lists them), then the final callback (is_last_backward: the last
  /// reduce-scatter input freed).
  void OnReduceGrad(StepState& s, int stage) override {
    for (size_t u = groups_.size(); u-- > 0;)
      if (groups_[u].root && groups_[u].stage == stage) Reduce(s, u);
    for (size_t u = 0; u < groups_.size(); ++u)
      if (!groups_[u].root && groups_[u].stage == stage) Reduce(s, u);
    FreeAll(s, &held_reduce_scatter_);
    for (size_t u = 0; u < groups_.size(); ++u)
      if (groups_[u].stage == stage) Free(s, &all_gather_[u]), issued_[u] = false;
    post_forward_order_.clear();
  }

  /// The multi-stage schedules' FSDP actions (_PipelineScheduleRuntime): UNSHARD calls
  /// unshard(async_op=True) on each FSDP module of the stage in modules() order (the stage module
  /// first, then its blocks): the all-gathers are issued; the wait before the stage's next
  /// computation copies each out, its all-gather output freed at once (not in forward); RESHARD
  /// reshards them.
  void OnStageShard(StepState& s, int stage, StageShard what) override {
    for (int pass = 0; pass < 2; ++pass)  // the root first, then the blocks
      for (size_t u = 0; u < groups_.size(); ++u) {
        if (groups_[u].stage != stage || groups_[u].root != (pass == 0)) continue;
        if (what == StageShard::kIssue) Unshard(s, u, /*async_op=*/true);
        else if (what == StageShard::kWait) CopyOut(s, u, /*forward=*/false);
        else Reshard(s, u);
      }
  }

  void OnOptimizerParams(const StepState& s, std::vector<OptParam>* ps) override {
    if (groups_.empty()) return;
    ps->clear();
    if (offload_) return;  // CPUOffloadPolicy: the optimizer steps the host shards (OnSetup's host state)
    // model.parameters() order: fully_shard replaces each parameter where it was registered.
    std::vector<std::pair<size_t, size_t>> order;
    for (size_t u = 0; u < groups_.size(); ++u)
      for (size_t i = 0; i < groups_[u].params.size(); ++i) order.emplace_back(u, i);
    std::sort(order.begin(), order.end(),
              [&](auto x, auto y) { return groups_[x.first].params[x.second] < groups_[y.first].params[y.second]; });
    for (const auto& [u, i] : order) {
      const TensorId t = s.g.parameters[groups_[u].params[i]];
      if (!s.rg[t]) continue;
      const Fsdp2Shard& sh = groups_[u].shards[i];
      std::vector<int64_t> sizes = s.bound.metas[t].sizes;
      if (!sizes.empty()) sizes[sh.dim] = sh.local_rows;
      const int64_t elem = ElementSize(s.g.tensors[t].dtype);
      ps->push_back(OptParam{s.g.tensors[t].name + " (shard)", sh.local_numel() * elem, grad_[u], sizes, elem});
    }
  }

  /// CPUOffloadPolicy: the optimizer's state of the host shards (their unpadded local tensors).
  void OnSetup(StepState& s) override {
    if (!offload_) return;
    if (groups_.empty()) Init(s);
    for (const Fsdp2Group& grp : groups_)
      for (size_t i = 0; i < grp.params.size(); ++i)
        if (s.rg[s.g.parameters[grp.params[i]]])
          s.ledger.AddHostBytes(s.cfg.optimizer.states * grp.shards[i].local_numel() * ShardElem(s, grp.params[i]));
  }

  void AfterOptimizerStep(StepState& s) override {
    for (StorageId& st : grad_) Free(s, &st);  // zero_grad(set_to_none=True): the views of each flat grad
  }

 private:
  void Init(const StepState& s) {
    // with cp, torchtitan shards over the flattened dp_shard_cp mesh (Note [Context parallel])
    const MeshCoord k = CoordOf(o_.mesh, o_.rank);
    const int shard_rank = k.dp_shard * std::max(o_.mesh.cp, 1) + k.cp;
    const Fsdp2Experts experts = Experts(s);
    const Fsdp2Experts* ex = experts.params.empty() ? nullptr : &experts;
    if (!s.cfg.pipeline) groups_ = MakeFsdp2Groups(s.g, s.bound, o_.wrap_modules, world_, shard_rank, 0, kNone, ex);
    // With pp, torchtitan's apply_fsdp runs on each stage's model part: its blocks, then its root.
    for (size_t j = 0; s.cfg.pipeline && j < s.cfg.pipeline->local.size(); ++j) {
      const PpStage& st = s.cfg.pipeline->local[j];
      for (Fsdp2Group& grp : MakeFsdp2Groups(s.g, s.bound, o_.wrap_modules, world_, shard_rank, st.begin, st.end, ex)) {
        grp.stage = static_cast<int>(j);
        groups_.push_back(std::move(grp));
      }
    }
    std::vector<std::pair<int, int>> calls;  // (stage, call in the stage): numbered over the stages
    for (Fsdp2Group& grp : groups_) {
      if (calls.empty() || calls.back() != std::make_pair(grp.stage, grp.call)) calls.emplace_back(grp.stage, grp.call);
      grp.call = static_cast<int>(calls.size() - 1);
    }
    nested_ = NestedGroups(groups_);
    apart_ = std::find(nested_.begin(), nested_.end(), true) != nested_.end();
    float8_.assign(s.g.parameters.size(), false);
    for (const Op& op : s.g.ops)
      if (op.kind == OpKind::kFp8Linear && op.attrs.GetString("weight", "") == "float8")
        for (size_t j = 0; j < s.g.parameters.size(); ++j) float8_[j] = float8_[j] || s.g.parameters[j] == op.inputs[1];
    const size_t n = groups_.size();
    group_of_op_.assign(s.g.ops.size(), -1);
    for (size_t u = 0; u < n; ++u)  // a call's first group stands for it
      for (OpId o : groups_[u].ops)
        if (group_of_op_[o] < 0) group_of_op_[o] = static_cast<int>(u);
    where_.assign(s.g.parameters.size(), {0, 0});
    for (size_t u = 0; u < n; ++u)
      for (size_t i = 0; i < groups_[u].params.size(); ++i) where_[groups_[u].params[i]] = {u, i};
    shard_.assign(n, {});
    unsharded_.assign(n, {});
    post_forward_.assign(n, {});
    all_gather_.assign(n, kNoStorage);
    issued_.assign(n, false);
    grad_.assign(n, kNoStorage);
    accumulated_.assign(s.g.parameters.size(), kNoStorage);
    host_grad_.assign(n, false);
    pending_.assign(n, 0);
    pre_backward_done_.assign(n, false);
    post_backward_done_.assign(n, false);
  }

  /// Under ep (Note [Expert parallel]): the expert weights' efsdp mesh and placement, as
  /// torchtitan's apply_fsdp_to_decoder gives them (Shard(1) when efsdp·ep exceeds the experts).
  Fsdp2Experts Experts(const StepState& s) const {
    Fsdp2Experts e;
    if (s.g.ep_degree <= 1 || s.g.ep_shards.empty()) return e;
    e.params = s.g.ep_shards;
    e.world = EfsdpDegree(o_.mesh);
    e.rank = EpCoordOf(o_.mesh, o_.rank).efsdp;
    const std::vector<int64_t>& sizes = s.bound.metas[e.params.front()].sizes;
    const int64_t experts = sizes.empty() ? 1 : sizes[0] * s.g.ep_degree;
    e.dim = ExpertShardDim(e.world, s.g.ep_degree, experts);
    return e;
  }

  /// The groups [CallBegin(u), CallEnd(u)) of |u|'s fully_shard call.
  size_t CallBegin(size_t u) const {
    while (u > 0 && groups_[u - 1].call == groups_[u].call) --u;
    return u;
  }
  size_t CallEnd(size_t u) const {
    const int call = groups_[u].call;
    while (u < groups_.size() && groups_[u].call == call) ++u;
    return u;
  }

  /// FSDPState._pre_forward of the call starting at group |u|: each group's unshard and
  /// copy-out in order; then, with explicit forward prefetching (torchtitan with ep:
  /// set_modules_to_forward_prefetch, each block the next one), the next block's all-gathers.
  void PreForward(StepState& s, size_t u) {
    for (size_t v = u; v < CallEnd(u); ++v)
      if (!groups_[v].params.empty()) {
        Unshard(s, v);
        CopyOut(s, v, /*forward=*/true);
      }
    if (s.g.ep_degree <= 1 || groups_[u].root) return;
    if (Apart()) {  // each block names the next block and its experts; the experts name nothing
      if (!Nested(u))
        for (size_t v : NeighbourBlock(groups_, nested_, u, /*next=*/true)) Unshard(s, v);
      return;
    }
    const size_t next = CallEnd(u);
    if (next >= groups_.size() || groups_[next].root || groups_[next].stage != groups_[u].stage) return;
    for (size_t v = next; v < CallEnd(next); ++v) Unshard(s, v);
  }

  bool Nested(size_t u) const { return nested_[u]; }
  bool Apart() const { return apart_; }

  /// _backward_prefetch of a call's second group (_num_param_groups > 1): walking back the
  /// post-forward order past its own call, every group of the call before it, last first.
  void PrefetchPreviousCall(StepState& s, size_t u) {
    auto it = std::find(post_forward_order_.rbegin(), post_forward_order_.rend(), u);
    int target = -1;
    for (it = it == post_forward_order_.rend() ? it : std::next(it); it != post_forward_order_.rend(); ++it) {
      const int call = groups_[*it].call;
      if (call == groups_[u].call) continue;
      if (target >= 0 && call != target) break;
      target = call;
      Unshard(s, *it);
    }
  }

  /// A floating-point input MixedPrecisionPolicy casts to param_dtype (the graph is bound in it).
  bool IsCastInput(const StepState& s, TensorId t) const {
    const Dtype own = s.g.tensors[t].dtype;
    return !o_.fsdp2_param_dtype.empty() && s.bound.metas[t].dtype != own &&
           (own == Dtype::kFloat32 || own == Dtype::kFloat16 || own == Dtype::kBFloat16);
  }

  std::string Name(size_t u) const { return "FSDP2 " + (groups_[u].module.empty() ? std::string("(root)") : groups_[u].module); }
  int64_t ShardElem(const StepState& s, uint32_t k) const { return ModelElementSize(s, s.g.parameters[k], Mp()); }
  /// MixedPrecisionPolicy is on: the graph is bound in param_dtype, the model keeps its own.
  bool Mp() const { return !o_.fsdp2_param_dtype.empty(); }
  /// The unsharded dtype: MixedPrecisionPolicy's param_dtype (the graph is bound in it), else the shard's.
  int64_t ParamElem(const StepState& s, uint32_t k) const { return ElementSize(s.bound.metas[s.g.parameters[k]].dtype); }
  /// What the all-gather moves and the unsharded parameter holds: a float8 weight's byte, else ParamElem.
  int64_t GatherElem(const StepState& s, uint32_t k) const { return float8_[k] ? 1 : ParamElem(s, k); }
  int64_t ReduceElem(const StepState& s, uint32_t k) const {
    if (o_.fsdp2_reduce_dtype.empty()) return ParamElem(s, k);
    return o_.fsdp2_reduce_dtype == "fp32" ? 4 : 2;  // fp16 | bf16
  }

  void Free(StepState& s, StorageId* st) {
    if (*st == kNoStorage) return;
    s.ledger.Unref(*st);
    *st = kNoStorage;
  }

  /// The DeviceMesh's rank tensors of a fully_shard call (init_device_mesh, then the
  /// coordinate lookup: arange, eq, nonzero), in host memory: traced on the CPU only.
  void MeshTensors(StepState& s) {
    if (!s.profile.host_collectives) return;
    // the 2-D mesh: tensor parallelism's setup made it (and its slices); with pp, torchtitan's world
    // mesh is made before the model
    if (o_.mesh.tp > 1 || o_.mesh.pp > 1) return;
    if (replicas_ > 1) {  // HSDP: one 2-D mesh, made before the first call (its lookups: bytes, not modelled)
      if (mesh_.empty()) mesh_.push_back(s.ledger.Alloc(4 * world_ * replicas_, "DeviceMesh ranks", Category::kParameter));
      return;
    }
    const int64_t ranks = 4 * world_;  // torch.arange(world), int32
    mesh_.push_back(s.ledger.Alloc(ranks, "DeviceMesh ranks", Category::kParameter));
    StorageId a = s.ledger.Alloc(ranks, "DeviceMesh coordinate", Category::kTemporary);
    StorageId b = s.ledger.Alloc(4, "DeviceMesh coordinate", Category::kTemporary);
    StorageId c = s.ledger.Alloc(world_, "DeviceMesh eq", Category::kTemporary);
    s.ledger.Unref(a);
    s.ledger.Unref(b);
    StorageId d = s.ledger.Alloc(8, "DeviceMesh nonzero", Category::kTemporary);
    s.ledger.Unref(c);
    s.ledger.Unref(d);
  }

  /// Parameter or buffer |t| whole, in the dtype the model keeps (ModelElementSize).
  void AllocOwnDtype(StepState& s, TensorId t) const {
    s.storage[t] = s.ledger.Alloc(ModelBytes(s, t, Mp()), s.g.tensors[t].name, Category::kParameter);
  }

  /// Note [Meta-device init]: to_empty gives the sharded DTensor an unpadded local tensor
  /// (empty_like); FSDP2's reset_sharded_param (its _apply override, once the module's tensors
  /// are all materialized) then re-pads it into a new_zeros copy. The original parameter is
  /// never allocated.
  bool MaterializeShard(StepState& s, TensorId t) {
    const uint32_t k = s.param_index[t];
    if (k >= s.g.parameters.size()) {  // a buffer: to_empty makes it whole, in its own dtype
      AllocOwnDtype(s, t);
      return true;
    }
    const auto [u, i] = where_[k];
    const Fsdp2Shard& sh = groups_[u].shards[i];
    const std::string& name = s.g.tensors[t].name;
    if (offload_) {  // to_empty on the CPU (torchtitan's init_device with CPU offload): the padded shard in host memory
      s.ledger.AddHostBytes(sh.padded_numel() * ShardElem(s, k));
      s.storage[t] = s.ledger.Alloc(0, name + " (unsharded)", Category::kParameter);
      return true;
    }
    shard_[u].push_back(s.ledger.Alloc(sh.local_numel() * ShardElem(s, k), name + " (shard)", Category::kParameter));
    s.storage[t] = s.ledger.Alloc(0, name + " (unsharded)", Category::kParameter);
    if (shard_[u].size() < groups_[u].params.size()) return true;
    for (size_t j = 0; j < groups_[u].params.size(); ++j) {  // the group's reset_sharded_param
      const Fsdp2Shard& x = groups_[u].shards[j];
      if (x.local_numel() == x.padded_numel()) continue;
      StorageId padded = s.ledger.Alloc(x.padded_numel() * ShardElem(s, groups_[u].params[j]),
                                        s.g.tensors[s.g.parameters[groups_[u].params[j]]].name + " (shard)", Category::kParameter);
      s.ledger.Unref(shard_[u][j]);
      shard_[u][j] = padded;
    }
    return true;
  }

  void FullyShard(StepState& s, size_t u) {
    MeshTensors(s);
    if (o_.meta_init) return;  // the shards were materialized as parameters (MaterializeShard)
    const Fsdp2Group& grp = groups_[u];
    for (size_t i = 0; i < grp.params.size(); ++i) {
      const int64_t bytes = grp.shards[i].padded_numel() * ShardElem(s, grp.params[i]);
      if (offload_) s.ledger.AddHostBytes(bytes);  // CPUOffloadPolicy: padded_sharded_param.cpu().pin_memory()
      else shard_[u].push_back(s.ledger.Alloc(bytes, s.g.tensors[s.g.parameters[grp.params[i]]].name + " (shard)", Category::kParameter));
    }
    for (uint32_t k : grp.params) {  // the original parameters, replaced by the sharded DTensors
      const TensorId t = s.g.parameters[k];
      s.ledger.Unref(s.storage[t]);
      s.storage[t] = s.ledger.Alloc(0, s.g.tensors[t].name + " (unsharded)", Category::kParameter);
    }
  }

  /// The all-gather of a group (foreach_all_gather), unless it is unsharded or pending. A group
  /// of one rank (efsdp of 1) gathers nothing: its copy-out copies the shards. Its buffers go to
  /// the all-gather streams, except under unshard(async_op=True) (a pipeline's UNSHARD action):
  /// get_all_gather_streams gives the side streams only to an implicit (forward, pre-backward)
  /// unshard, an explicit one runs on the current stream (_fsdp_param_group.py).
  void Unshard(StepState& s, size_t u, bool async_op = false) {
    if (issued_[u] || !unsharded_[u].empty() || groups_[u].params.empty()) return;
    issued_[u] = true;
    const Fsdp2Group& grp = groups_[u];
    if (grp.world == 1) return;
    const uint8_t stream = async_op ? 0 : kFsdp2AllGatherStream;
    if (!post_forward_[u].empty()) return GatherPostForward(s, u, stream);
    if (offload_) return GatherOffloaded(s, u, stream);
    int64_t bytes = 0, low = 0;
    std::vector<StorageId> bits;
    SideStream on(s, stream);
    for (size_t i = 0; i < grp.params.size(); ++i) {
      bytes += grp.shards[i].padded_numel() * GatherElem(s, grp.params[i]);
      if (float8_[grp.params[i]]) bits.push_back(Float8Cast(s, u, grp.params[i], grp.shards[i].padded_numel()));
      else if (ParamElem(s, grp.params[i]) != ShardElem(s, grp.params[i]))
        low += grp.shards[i].padded_numel() * ParamElem(s, grp.params[i]);
    }
    // MixedPrecisionPolicy: the shards cast into one flat param_dtype buffer (_foreach_copy_);
    // a float8 weight's all-gather input is its fsdp_pre_all_gather bits instead
    // (_get_param_all_gather_inputs). Its views stay in foreach_all_gather's all_gather_inputs
    // until the collective returns.
    StorageId cast = low ? s.ledger.Alloc(low, Name(u) + " all-gather input (cast)", Category::kParameter) : kNoStorage;
    all_gather_[u] = s.ledger.Alloc(bytes * grp.world, Name(u) + " all-gather output", Category::kParameter);
    Collective(s, grp.world, bytes * grp.world, 2, Name(u) + " all-gather (gloo flat output)");
    if (cast != kNoStorage) s.ledger.Unref(cast);
    for (StorageId b : bits) s.ledger.Unref(b);
  }

  /// CPUOffloadPolicy (Note [FSDP2]): no foreach-copy path; each parameter's all_gather_inputs
  /// copies its host shard to the device (.to(device, non_blocking=True)), cast to param_dtype
  /// under MixedPrecisionPolicy (the copy then dropped); foreach_all_gather holds the inputs until
  /// the collective is issued.
  void GatherOffloaded(StepState& s, size_t u, uint8_t stream) {
    const Fsdp2Group& grp = groups_[u];
    SideStream on(s, stream);
    std::vector<StorageId> inputs = DeviceInputs(s, u);
    int64_t bytes = 0;
    for (size_t i = 0; i < grp.params.size(); ++i) bytes += grp.shards[i].padded_numel() * GatherElem(s, grp.params[i]);
    all_gather_[u] = s.ledger.Alloc(bytes * grp.world, Name(u) + " all-gather output", Category::kParameter);
    Collective(s, grp.world, bytes * grp.world, 2, Name(u) + " all-gather (gloo flat output)");
    FreeAll(s, &inputs);
  }

  /// The device copies of a group's host shards, each in param_dtype.
  std::vector<StorageId> DeviceInputs(StepState& s, size_t u) {
    std::vector<StorageId> out;
    for (size_t i = 0; i < groups_[u].params.size(); ++i) out.push_back(DeviceInput(s, u, i));
    return out;
  }

  /// Entry |i|'s host shard copied to the device, then cast to param_dtype if it differs.
  StorageId DeviceInput(StepState& s, size_t u, size_t i) {
    const uint32_t k = groups_[u].params[i];
    const int64_t n = groups_[u].shards[i].padded_numel();
    const std::string& name = s.g.tensors[s.g.parameters[k]].name;
    StorageId copy = s.ledger.Alloc(n * ShardElem(s, k), name + " (shard, copied to the device)", Category::kParameter);
    if (ParamElem(s, k) == ShardElem(s, k)) return copy;
    StorageId cast = s.ledger.Alloc(n * ParamElem(s, k), name + " (shard, param_dtype)", Category::kParameter);
    s.ledger.Unref(copy);
    return cast;
  }

  /// all_gather_inputs[0] of a group of one rank: the host shard copied (and cast) to the device
  /// under CPUOffloadPolicy, else the shard cast to param_dtype (none when it is in param_dtype).
  StorageId OneRankInput(StepState& s, size_t u, size_t i, int64_t bytes) {
    if (offload_) return DeviceInput(s, u, i);
    const uint32_t k = groups_[u].params[i];
    if (ParamElem(s, k) == ShardElem(s, k)) return kNoStorage;
    const std::string& name = s.g.tensors[s.g.parameters[k]].name;
    return s.ledger.Alloc(bytes, name + " all-gather input (cast)", Category::kTemporary);
  }

  /// The all-gather from the post-forward slices (already in param_dtype): over the K ranks of the
  /// rank's post-forward group, into an output of the whole padded parameters.
  /// Under MixedPrecisionPolicy _get_param_all_gather_inputs still takes its foreach-copy path
  /// (param_dtype set): the slices copied into one flat param_dtype buffer first.
  void GatherPostForward(StepState& s, size_t u, uint8_t stream) {
    const Fsdp2Group& grp = groups_[u];
    int64_t bytes = 0;
    for (size_t i = 0; i < grp.params.size(); ++i) bytes += grp.shards[i].padded_numel() * grp.world * GatherElem(s, grp.params[i]);
    SideStream on(s, stream);
    const int k = o_.fsdp2_post_forward_world;
    StorageId flat = o_.fsdp2_param_dtype.empty()
                         ? kNoStorage
                         : s.ledger.Alloc(bytes / k, Name(u) + " all-gather input (cast)", Category::kParameter);
    all_gather_[u] = s.ledger.Alloc(bytes, Name(u) + " all-gather output", Category::kParameter);
    Collective(s, k, bytes, 2, Name(u) + " all-gather (gloo flat output)");
    Free(s, &flat);
  }

  /// fsdp_pre_all_gather of a float8 weight (torchao/float8/fsdp_utils.py, without a precomputed
  /// scale: hp_tensor_to_float8_dynamic(reduce_amax=True)): tensor_to_amax's abs of the shard
  /// (the amax then all-reduced: scalars, not modelled), `shard.to(float32) * scale` and its
  /// clamp (fp32), the float8 bits, which all_gather_inputs holds until the collective returns.
  StorageId Float8Cast(StepState& s, size_t u, uint32_t k, int64_t numel) {
    const int64_t es = ShardElem(s, k);
    const std::string name = Name(u) + " float8 all-gather cast";
    s.ledger.Unref(s.ledger.Alloc(numel * es, name + ": abs", Category::kTemporary));
    StorageId up = es != 4 ? s.ledger.Alloc(numel * 4, name + ": fp32 upcast", Category::kTemporary) : kNoStorage;
    StorageId scaled = s.ledger.Alloc(numel * 4, name + ": scaled", Category::kTemporary);
    if (up != kNoStorage) s.ledger.Unref(up);
    StorageId clamped = s.ledger.Alloc(numel * 4, name + ": clamped", Category::kTemporary);
    StorageId bits = s.ledger.Alloc(numel, name + ": float8 bits", Category::kParameter);
    s.ledger.Unref(scaled);
    s.ledger.Unref(clamped);
    return bits;
  }

  /// gloo's staging copies of a collective on host tensors (ProcessGroupGloo: the flat
  /// output of allgather; the input of reduce_scatter_tensor and its two scalars).
  void Collective(StepState& s, int world, int64_t bytes, int copies, const std::string& what) {
    if (!s.profile.host_collectives || world <= 1) return;
    for (int i = 0; i < copies; ++i) s.ledger.Unref(s.ledger.Alloc(bytes, what, Category::kTemporary));
  }

  /// wait_for_unshard: the copy-out into the unsharded parameters; in forward the all-gather
  /// output is kept until the next group's copy-out is done, in backward it is freed at once.
  /// A Shard(1) parameter is copied out into an empty_like temporary, then chunk-cat into its
  /// buffer; the temporaries die when the copy-out returns. A group of one rank copies each
  /// shard (all_gather_inputs: cast to param_dtype first under MixedPrecisionPolicy).
  void CopyOut(StepState& s, size_t u, bool forward) {
    if (!issued_[u]) return;
    issued_[u] = false;
    const Fsdp2Group& grp = groups_[u];
    std::vector<StorageId> temps;
    for (size_t i = 0; i < grp.params.size(); ++i) {
      const uint32_t k = grp.params[i];
      const int64_t bytes = grp.shards[i].padded_numel() * grp.world * GatherElem(s, k);
      const std::string& name = s.g.tensors[s.g.parameters[k]].name;
      const StorageId in = grp.world == 1 ? OneRankInput(s, u, i, bytes) : kNoStorage;
      unsharded_[u].push_back(s.ledger.Alloc(bytes, name + " (unsharded)", Category::kParameter));
      if (in != kNoStorage) s.ledger.Unref(in);
      if (grp.world > 1 && grp.shards[i].dim != 0)
        temps.push_back(s.ledger.Alloc(bytes, name + " all-gather Shard(1) copy-out", Category::kTemporary));
    }
    for (StorageId t : temps) s.ledger.Unref(t);
    FreeAll(s, &post_forward_[u]);  // to_unsharded: the post-forward slices, once copied out
    if (forward) Free(s, &held_all_gather_);  // the previous group's, held by prev_all_gather_state until here
    if (forward && grp.world > 1) {
      held_all_gather_ = all_gather_[u];
      all_gather_[u] = kNoStorage;
    } else {
      Free(s, &all_gather_[u]);
    }
  }

  /// reshard_after_forward=K (_to_sharded_post_forward): each parameter's 1/K slice of its
  /// gathered buffer cloned (the rank's index in its group of K), then the buffer freed.
  void ReshardPostForward(StepState& s, size_t u) {
    const Fsdp2Group& grp = groups_[u];
    const int k = o_.fsdp2_post_forward_world;
    for (size_t i = 0; i < unsharded_[u].size(); ++i) {
      const int64_t bytes = grp.shards[i].padded_numel() * grp.world / k * GatherElem(s, grp.params[i]);
      post_forward_[u].push_back(s.ledger.Alloc(bytes, s.g.tensors[s.g.parameters[grp.params[i]]].name + " (post-forward shard)",
                                                Category::kParameter));
      s.ledger.Unref(unsharded_[u][i]);
    }
    unsharded_[u].clear();
  }

  void Reshard(StepState& s, size_t u) {
    for (StorageId& st : unsharded_[u]) s.ledger.Unref(st);
    unsharded_[u].clear();
  }

  /// post_backward: reshard, then foreach_reduce of the group's unsharded grads.
  void PostBackward(StepState& s, size_t u) {
    post_backward_done_[u] = true;
    // In a pipeline schedule every backward runs with set_requires_gradient_sync(False) and
    // set_reshard_after_backward(False): the unsharded grads accumulate over the microbatches,
    // the parameters stay unsharded until perform_reduce_grad (OnReduceGrad).
    if (s.cfg.pipeline) return AccumulateUnsharded(s, u);
    Reduce(s, u);
  }

  /// A pipeline microbatch's post_backward without gradient sync (FSDPParamGroup.post_backward,
  /// reduce_grads False): accumulate_unsharded_grad_if_needed (the reduce-dtype copy += the new
  /// .grad, which goes), then to_accumulated_grad_if_needed (a .grad in another dtype than
  /// MixedPrecisionPolicy's reduce_dtype becomes a copy in it, unsharded_accumulated_grad).
  void AccumulateUnsharded(StepState& s, size_t u) {
    for (uint32_t k : groups_[u].params) {
      StorageId& grad = s.param_grad[k];
      if (accumulated_[k] != kNoStorage) Free(s, &grad);
      if (grad == kNoStorage || !UpcastsGrad(s, k)) continue;
      const TensorId t = s.g.parameters[k];
      // unsharded_grad.to(reduce_dtype): the .grad's whole local tensor (a Replicate grad: all of it)
      accumulated_[k] = s.ledger.Alloc(s.ledger.bytes(grad) / ParamElem(s, k) * ReduceElem(s, k),
                                       s.g.tensors[t].name + " (unsharded_accumulated_grad)", Category::kGradient);
      Free(s, &grad);
    }
  }

  /// _get_grad_inner_tensor: a tensor-parallel parameter's grad in another placement than the
  /// parameter is redistributed to it. The vocabulary-parallel embedding's grad is a Replicate
  /// DTensor holding the whole [V, h] (its storage larger than the rank's rows; Note [Tensor
  /// parallel]): Replicate -> Shard(0) is _select_split_tensor(clone=True), the rank's rows copied;
  /// post_backward then drops the whole grad.
  void RedistributeReplicateGrad(StepState& s, uint32_t k, int64_t elem) {
    StorageId& grad = s.param_grad[k];
    if (grad == kNoStorage || !IsTpShard(s, k)) return;
    const TensorId t = s.g.parameters[k];
    const int64_t rows = s.bound.metas[t].numel() * elem;
    if (s.ledger.bytes(grad) <= rows) return;
    StorageId local = s.ledger.Alloc(rows, s.g.tensors[t].name + ".grad (Replicate -> Shard(0))", Category::kGradient);
    Free(s, &grad);
    grad = local;
  }

  bool IsTpShard(const StepState& s, uint32_t k) const {
    for (const Graph::TpShard& sh : s.g.tp_shards)
      if (sh.param == s.g.parameters[k]) return true;
    return false;
  }

  /// Whether reduce_dtype differs from the unsharded grad's dtype (param_dtype).
  bool UpcastsGrad(const StepState& s, uint32_t k) const {
    if (o_.fsdp2_reduce_dtype.empty()) return false;
    const Dtype d = s.bound.metas[s.g.parameters[k]].dtype;
    const Dtype r = o_.fsdp2_reduce_dtype == "fp32" ? Dtype::kFloat32
                    : o_.fsdp2_reduce_dtype == "bf16" ? Dtype::kBFloat16 : Dtype::kFloat16;
    return d != r;
  }

  /// post_backward with gradient sync: reshard, then foreach_reduce of the unsharded grads.
  void Reduce(StepState& s, size_t u) {
    const Fsdp2Group& grp = groups_[u];
    // A root without parameters has no FSDPParamGroup (fully_shard makes none), so no
    // post_backward of its own: the previous reduce-scatter input waits for the next one.
    if (grp.params.empty()) return;
    // post_backward takes each grad (unsharded_grad_data; the grads a pipeline's microbatches
    // accumulated in reduce_dtype first) before it reshards.
    for (uint32_t k : grp.params) {
      const bool accumulated = accumulated_[k] != kNoStorage;
      if (accumulated) {
        Free(s, &s.param_grad[k]);
        s.param_grad[k] = std::exchange(accumulated_[k], kNoStorage);
      }
      RedistributeReplicateGrad(s, k, accumulated ? ReduceElem(s, k) : ParamElem(s, k));
    }
    Reshard(s, u);
    std::vector<StorageId> loop_held = ChunkShardedGrads(s, u);
    std::vector<uint32_t> with_grad;
    int64_t in_bytes = 0;
    for (size_t i = 0; i < grp.params.size(); ++i)
      if (s.param_grad[grp.params[i]] != kNoStorage) {
        with_grad.push_back(grp.params[i]);
        in_bytes += grp.shards[i].padded_numel() * grp.world * ReduceElem(s, grp.params[i]);
      }
    // post_backward_rs_wait, in a call's last group only: at most one reduce-scatter input in
    // flight (reduce_scatter_states), so a call of two groups keeps both of its inputs until the
    // next call's.
    if (CallEnd(u) == u + 1) FreeAll(s, &held_reduce_scatter_);
    if (with_grad.empty()) return;
    held_reduce_scatter_.push_back(s.ledger.Alloc(in_bytes, Name(u) + " reduce-scatter input", Category::kGradient));
    ChunkCatPadding(s, u, with_grad);
    // unsharded_grads.clear(); the loop variable of foreach_reduce's Shard(i) loop (world > 1)
    // keeps the last grad, or the original of a Shard(1) one.
    const bool keeps_last = grp.world > 1 && loop_held.empty();
    for (size_t i = 0; i + (keeps_last ? 1 : 0) < with_grad.size(); ++i) Free(s, &s.param_grad[with_grad[i]]);
    SideStream on(s, kFsdp2ReduceScatterStream);  // the output and the post-reduce cast
    StorageId out = s.ledger.Alloc(in_bytes / grp.world, Name(u) + " sharded grads (reduce-scatter output)", Category::kGradient);
    if (s.profile.host_collectives && grp.world > 1) {
      StorageId copy = s.ledger.Alloc(in_bytes, Name(u) + " reduce-scatter (gloo input copy)", Category::kTemporary);
      StorageId a = s.ledger.Alloc(8, "gloo reduce-scatter scalar", Category::kTemporary);
      StorageId b = s.ledger.Alloc(4, "gloo reduce-scatter scalar", Category::kTemporary);
      s.ledger.Unref(b);
      s.ledger.Unref(a);
      s.ledger.Unref(copy);
    }
    // HSDP: the reduce-scatter output all-reduced in place over the replicas (gloo: two scalars).
    if (replicas_ > 1 && s.profile.host_collectives) {
      StorageId a = s.ledger.Alloc(8, "gloo all-reduce scalar", Category::kTemporary);
      StorageId b = s.ledger.Alloc(4, "gloo all-reduce scalar", Category::kTemporary);
      s.ledger.Unref(b);
      s.ledger.Unref(a);
    }
    // The sharded grads in the parameters' dtype (_to_dtype_if_needed), accumulated into an
    // existing .grad from the second pass on.
    const int64_t shard_bytes = ShardBytes(s, u, with_grad);
    if (shard_bytes != in_bytes / grp.world) {
      StorageId cast = s.ledger.Alloc(shard_bytes, Name(u) + " sharded grads", Category::kGradient);
      s.ledger.Unref(out);
      out = cast;
    }
    if (offload_) {  // CPUOffloadPolicy: new_sharded_grad.to("cpu"); the device output dies with foreach_reduce
      if (!host_grad_[u]) s.ledger.AddHostBytes(shard_bytes);
      host_grad_[u] = true;
      s.ledger.Unref(out);
    } else if (grad_[u] == kNoStorage) {
      grad_[u] = out;
    } else {
      s.ledger.Unref(out);
    }
    Free(s, &s.param_grad[with_grad.back()]);
    FreeAll(s, &loop_held);
  }

  /// foreach_reduce's Shard(i > 0) loop (world > 1): each such grad becomes
  /// torch.cat(torch.chunk(grad, world, dim=i), dim=0) in the list. The 2.13 CPU traces free the
  /// originals in pairs, after every second cat (the loop's tuples and chunks hold them); an odd
  /// last one stays with the loop variable until foreach_reduce returns (returned).
  std::vector<StorageId> ChunkShardedGrads(StepState& s, size_t u) {
    const Fsdp2Group& grp = groups_[u];
    std::vector<StorageId> pending;
    for (size_t i = 0, n = 0; i < grp.params.size() && grp.world > 1; ++i) {
      StorageId& grad = s.param_grad[grp.params[i]];
      if (grp.shards[i].dim == 0 || grad == kNoStorage) continue;
      pending.push_back(grad);
      grad = s.ledger.Alloc(grp.shards[i].padded_numel() * grp.world * ParamElem(s, grp.params[i]),
                            Name(u) + " Shard(1) grad (chunk, cat)", Category::kGradient);
      if (++n % 2 == 0) FreeAll(s, &pending);
    }
    return pending;
  }

  void FreeAll(StepState& s, std::vector<StorageId>* st) {
    for (StorageId x : *st) s.ledger.Unref(x);
    st->clear();
  }

  /// torch._chunk_cat (foreach_reduce_scatter_copy_in): a grad whose dim 0 the world does not
  /// divide is first padded into a copy (_pad_chunk: constant_pad_nd); the copies are freed
  /// together once they are copied into the reduce-scatter input.
  void ChunkCatPadding(StepState& s, size_t u, const std::vector<uint32_t>& with_grad) {
    const Fsdp2Group& grp = groups_[u];
    std::vector<StorageId> padded;
    for (size_t i = 0; i < grp.params.size(); ++i) {
      const Fsdp2Shard& sh = grp.shards[i];
      if (sh.dim != 0 || sh.rows % grp.world == 0 ||
          std::find(with_grad.begin(), with_grad.end(), grp.params[i]) == with_grad.end())
        continue;
      padded.push_back(s.ledger.Alloc(sh.padded_numel() * grp.world * ParamElem(s, grp.params[i]),
                                      Name(u) + " reduce-scatter padded grad (_chunk_cat)", Category::kTemporary));
    }
    for (StorageId st : padded) s.ledger.Unref(st);
  }

  int64_t ShardBytes(const StepState& s, size_t u, const std::vector<uint32_t>& with_grad) const {
    int64_t bytes = 0;
    const Fsdp2Group& grp = groups_[u];
    for (size_t i = 0; i < grp.params.size(); ++i)
      if (std::find(with_grad.begin(), with_grad.end(), grp.params[i]) != with_grad.end())
        bytes += grp.shards[i].padded_numel() * ShardElem(s, grp.params[i]);
    return bytes;
  }

  ParallelOptions o_;
  int world_;     ///< the shard group: dp_shard (dp_shard·cp with context parallelism)
  int replicas_;  ///< HSDP's replicate group: dp_replicate
  bool offload_;  ///< CPUOffloadPolicy (--offload params): shards, grads and optimizer state on the host
  std::vector<bool> host_grad_;  ///< per group: its sharded grads exist on the host
  std::vector<Fsdp2Group> groups_;
  std::vector<bool> nested_;  ///< per group: an experts call wrapped apart inside a block's (NestedGroups)
  bool apart_ = false;        ///< any nested_
  std::vector<int> group_of_op_, pending_;
  std::vector<bool> pre_backward_done_, post_backward_done_;
  std::vector<bool> float8_;  ///< per Graph::parameters index: a weight all-gathered in float8
  std::vector<std::vector<StorageId>> shard_, unsharded_;
  std::vector<std::vector<StorageId>> post_forward_;  ///< per group: reshard_after_forward=K's slices
  std::vector<StorageId> all_gather_, grad_, mesh_, user_inputs_;
  std::vector<StorageId> accumulated_;  ///< per Graph::parameters index: unsharded_accumulated_grad
  std::vector<size_t> post_forward_order_;
  std::vector<std::pair<size_t, size_t>> where_;  ///< per Graph::parameters index: (group, entry)
  std::vector<bool> issued_;  ///< per group: unshard() called, its copy-out pending
  StorageId held_all_gather_ = kNoStorage;
  std::vector<StorageId> held_reduce_scatter_;  ///< reduce_scatter_states: the inputs in flight
};

}  // namespace

std::unique_ptr<TrainingSetup> MakeFsdp2(const ParallelOptions& o) { return std::make_unique<Fsdp2>(o); }

}  // namespace memsim
