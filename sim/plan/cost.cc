#include "sim/plan/cost.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <set>

#include "lib/autodiff/optimizer.h"
#include "lib/ir/tensor_parallel.h"
#include "lib/ops/bind.h"
#include "lib/ops/profile.h"

namespace memsim {

extern const std::string_view kGpuPerfJson;  // generated from sim/data/gpu_perf.json

namespace {

std::vector<GpuPerf> ParsePerfTable() {
  std::vector<GpuPerf> rows;
  const nlohmann::json table = nlohmann::json::parse(kGpuPerfJson);
  for (const auto& e : table.at("rows")) {
    GpuPerf p;
    p.gpu = e.at("gpu").get<std::string>();
    p.fp32_tflops = e.at("fp32_tflops").get<double>();
    p.fp16_tflops = e.at("fp16_tflops").get<double>();
    p.bf16_tflops = e.at("bf16_tflops").get<double>();
    p.hbm_gbps = e.at("hbm_gbps").get<double>();
    p.link_gbps = e.at("link_gbps").get<double>();
    p.node_gpus = e.at("node_gpus").get<int>();
    p.net_gbps = e.at("net_gbps").get<double>();
    p.host_gbps = e.at("host_gbps").get<double>();
    p.source = e.at("source").get<std::string>();
    rows.push_back(std::move(p));
  }
  return rows;
}

bool SameName(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

bool IsFsdp(Sharding s) { return s == Sharding::kFsdp || s == Sharding::kFsdpGradOp || s == Sharding::kFsdpOffload; }
bool ShardsParams(Sharding s) { return s == Sharding::kZero3 || s == Sharding::kZero3Offload || IsFsdp(s) || IsMeshSharding(s); }
/// The ranks a parameter and its states are sharded over: the data-parallel world, half of it
/// for HSDP (sharded within a replica).
int64_t ShardRanks(const PlanCandidate& c) { return c.sharding == Sharding::kHsdp ? c.world / 2 : c.world; }
bool ShardsStates(Sharding s) { return s != Sharding::kDdp; }
bool OffloadsStates(Sharding s) { return s == Sharding::kZero3Offload || s == Sharding::kFsdpOffload; }

/// Bytes per element of the parameters as they rest on the device: bf16 with --dtype bf16 (DDP,
/// ZeRO's bf16 mode: the module), fp32 otherwise (autocast keeps fp32 weights; FSDP's mixed
/// precision keeps fp32 shards).
int64_t RestingBytes(const PlanCandidate& c) {
  return c.precision == Precision::kBf16 && !IsFsdp(c.sharding) && !IsMeshSharding(c.sharding) ? 2 : 4;
}
/// Bytes per element of the parameters as the ranks exchange them (gathers) and of the grads.
int64_t ComputeBytes(const PlanCandidate& c) { return c.precision == Precision::kBf16 ? 2 : 4; }

double Elements(const TensorMeta& m) { return static_cast<double>(m.numel()); }

/// The forward FLOPs of op |op| (0 for an op that is not a matrix product).
double FlopsOf(const Op& op, const BoundGraph& b) {
  if (op.outputs.empty() || op.inputs.empty()) return 0;
  const TensorMeta& out = b.metas[op.outputs[0]];
  auto last = [&](TensorId t) { return b.metas[t].sizes.empty() ? 1.0 : static_cast<double>(b.metas[t].sizes.back()); };
  switch (op.kind) {
    case OpKind::kLinear: case OpKind::kLinear4bit: case OpKind::kLinear8bit: case OpKind::kFp8Linear:
    case OpKind::kMatmul: case OpKind::kMm: case OpKind::kBmm:
      return 2 * Elements(out) * last(op.inputs[0]);
    case OpKind::kBaddbmm:
      return op.inputs.size() > 1 ? 2 * Elements(out) * last(op.inputs[1]) : 0;
    case OpKind::kConv1d: case OpKind::kConv2d: {
      if (op.inputs.size() < 2 || b.metas[op.inputs[1]].sizes.empty()) return 0;
      const TensorMeta& w = b.metas[op.inputs[1]];
      return 2 * Elements(out) * (Elements(w) / static_cast<double>(std::max<int64_t>(1, w.sizes[0])));
    }
    case OpKind::kSdpa: {
      if (op.inputs.size() < 3) return 0;
      const TensorMeta& q = b.metas[op.inputs[0]];
      const TensorMeta& k = b.metas[op.inputs[1]];
      if (q.sizes.size() < 2 || k.sizes.size() < 2) return 0;
      const double l = static_cast<double>(q.sizes[q.sizes.size() - 2]), e = last(op.inputs[0]);
      const double s = static_cast<double>(k.sizes[k.sizes.size() - 2]), ev = last(op.inputs[2]);
      const double heads = Elements(q) / std::max(1.0, l * e);
      const double f = 2 * heads * l * s * (e + ev);
      return op.attrs.GetBool("is_causal", false) ? f / 2 : f;
    }
    default:
      return 0;
  }
}

}  // namespace

double GpuPerf::PeakFlops(Dtype d) const {
  const double t = d == Dtype::kBFloat16 ? bf16_tflops : d == Dtype::kFloat16 ? fp16_tflops : fp32_tflops;
  return t * 1e12;
}

const std::vector<GpuPerf>& GpuPerfTable() {
  static const std::vector<GpuPerf> table = ParsePerfTable();
  return table;
}

std::optional<GpuPerf> FindGpuPerf(std::string_view name) {
  for (const GpuPerf& p : GpuPerfTable())
    if (SameName(p.gpu, name)) return p;
  return std::nullopt;
}

CostModel::CostModel(const Graph& g, const PlanRequest& r, const PlanModel& m, const GpuPerf& perf)
    : g_(g), r_(r), m_(m), perf_(perf) {
  if (auto opt = FindOptimizer(r.optimizer)) {
    states_ = opt->states;
    // Parameter-sized states only (not Adafactor's factored ones, nor 8-bit or recorded ones).
    state_floor_ = opt->family == OptimizerFamily::kTorch && opt->state_bits == 32 && !opt->program &&
                   r.optimizer != "adafactor" && r.optimizer != "recorded";
  } else {
    states_ = 0;
    state_floor_ = false;
  }
}

Result<const std::vector<OpWork>*> CostModel::Work(Precision p, int64_t micro_batch) {
  const auto key = std::make_pair(static_cast<int>(p), micro_batch);
  if (auto it = work_.find(key); it != work_.end()) return &it->second;
  std::optional<Profile> profile = FindProfile("cuda", r_.torch);
  if (!profile) return Status::InvalidArgument("--torch " + r_.torch + ": no such release profile");
  BindOptions bo;
  bo.profile = &*profile;
  if (p == Precision::kAmpBf16) bo.autocast = Dtype::kBFloat16;
  if (p == Precision::kAmpFp16) bo.autocast = Dtype::kFloat16;
  if (p == Precision::kBf16) bo.model_dtype = Dtype::kBFloat16;
  Bindings b = g_.DefaultBindings();
  if (uint32_t s = g_.FindSymbol("batch"); s != kNone) b[s] = micro_batch;
  if (uint32_t s = g_.FindSymbol("seq"); s != kNone && r_.seq > 0) b[s] = r_.seq;
  MEMSIM_ASSIGN_OR_RETURN(BoundGraph bound, BindGraph(g_, b, bo));
  if (param_elems_ == 0)
    for (TensorId t : g_.parameters) param_elems_ += bound.metas[t].numel();
  std::map<std::string, int> block_index;
  for (size_t i = 0; i < m_.blocks.size(); ++i) block_index[m_.blocks[i]] = static_cast<int>(i);
  std::vector<OpWork> work;
  work.reserve(g_.ops.size());
  for (const Op& op : g_.ops) {
    OpWork w;
    w.flops = FlopsOf(op, bound);
    w.mm = w.flops > 0 && op.kind != OpKind::kSdpa && op.kind != OpKind::kConv1d && op.kind != OpKind::kConv2d;
    w.sdpa = op.kind == OpKind::kSdpa;
    if (!op.outputs.empty()) w.dtype = bound.metas[op.outputs[0]].dtype;
    std::set<TensorId> storages;
    for (TensorId t : op.inputs) {
      w.bytes += static_cast<double>(bound.metas[t].bytes());
      storages.insert(bound.owner[t]);
    }
    for (TensorId t : op.outputs) {
      if (bound.owner[t] == t) w.bytes += static_cast<double>(bound.metas[t].bytes());
      storages.insert(bound.owner[t]);
    }
    for (TensorId s : storages) {
      const TensorRole role = g_.tensors[s].role;
      if (role != TensorRole::kParameter && role != TensorRole::kBuffer) w.live += bound.metas[s].bytes();
    }
    const bool linear = op.kind == OpKind::kLinear && op.inputs.size() >= 2 &&
                        g_.tensors[op.inputs[1]].role == TensorRole::kParameter &&
                        g_.tensors[op.inputs[0]].role == TensorRole::kActivation;
    if (linear) {
      const TensorId x = op.inputs[0];
      if (bound.autocast) {  // the cast copy is saved (one per op: autocast caches only leaf casts)
        w.saved_key = x;
        w.saved = bound.metas[x].numel() * std::min(ElementSize(bound.metas[x].dtype), ElementSize(*bound.autocast));
      } else {
        w.saved_key = bound.owner[x];
        w.saved = bound.metas[bound.owner[x]].bytes();
      }
    }
    if (op.kind == OpKind::kLinear && !op.inputs.empty() && !op.outputs.empty()) {
      const std::string style = TpStyleOf("layers", op.module);
      if (style == "rowwise") w.tp_forward = static_cast<double>(bound.metas[op.outputs[0]].bytes());
      if (style == "colwise") w.tp_backward = static_cast<double>(bound.metas[op.inputs[0]].bytes());
    }
    for (size_t dot = op.module.find('.'); dot != std::string::npos; dot = op.module.find('.', dot + 1))
      if (auto it = block_index.find(op.module.substr(0, dot)); it != block_index.end()) w.block = it->second;
    if (auto it = block_index.find(op.module); it != block_index.end()) w.block = it->second;
    work.push_back(w);
  }
  return &work_.emplace(key, std::move(work)).first->second;
}

int64_t CostModel::ParamBytesLocal(const PlanCandidate& c) const {
  if (c.sharding == Sharding::kFsdpOffload) return 0;  // CPUOffload: the shards live in host memory
  // With tp, every parameter is either replicated or split in tp: at least 1/tp of it is here.
  const int64_t bytes = param_elems_ * RestingBytes(c) / c.tp;
  return ShardsParams(c.sharding) ? bytes / ShardRanks(c) : bytes;
}

int64_t CostModel::StateBytesLocal(const PlanCandidate& c) const {
  if (!state_floor_ || OffloadsStates(c.sharding)) return 0;
  const int64_t bytes = param_elems_ * states_ * RestingBytes(c) / c.tp;
  return ShardsStates(c.sharding) ? bytes / ShardRanks(c) : bytes;
}

int64_t CostModel::SavedBytes(const std::vector<OpWork>& work, const Checkpointing& ck) {
  // Outside the checkpointed blocks, every linear's saved input is alive when the forward ends.
  std::set<TensorId> seen;
  int64_t sum = 0;
  for (const OpWork& w : work) {
    if (w.saved_key == kNone || (w.block >= 0 && ck.every > 0 && w.block % ck.every == 0)) continue;
    if (seen.insert(w.saved_key).second) sum += w.saved;
  }
  return sum;
}

Result<int64_t> CostModel::MemoryFloor(const PlanCandidate& c) {
  MEMSIM_ASSIGN_OR_RETURN(const std::vector<OpWork>* work, Work(c.precision, c.micro_batch));
  int64_t largest = 0;
  for (const OpWork& w : *work) largest = std::max(largest, w.live);
  const int64_t params = ParamBytesLocal(c);
  // With tp an activation is replicated or split in tp: at least 1/tp of its bytes.
  return params + std::max({StateBytesLocal(c), largest / c.tp, SavedBytes(*work, c.checkpoint) / c.tp});
}

Result<StepTime> CostModel::TimeOf(const PlanCandidate& c) {
  MEMSIM_ASSIGN_OR_RETURN(const std::vector<OpWork>* work, Work(c.precision, c.micro_batch));
  const double hbm = perf_.hbm_gbps * 1e9;
  const double t = c.tp;
  double forward = 0, recompute = 0, tp_volume = 0;
  for (const OpWork& w : *work) {
    double time = std::max(w.flops > 0 ? w.flops / perf_.PeakFlops(w.dtype) : 0.0, w.bytes / hbm);
    // Tensor parallel: a block's matrix products and attention are split over the tp ranks; its
    // other ops (norms, residual adds) are counted whole.
    if (c.tp > 1 && w.block >= 0 && w.flops > 0) time /= t;
    forward += time;
    const bool checkpointed = w.block >= 0 && c.checkpoint.every > 0 && w.block % c.checkpoint.every == 0;
    // Ring all-reduce: 2 (tp-1)/tp of the tensor per rank; a recomputed forward all-reduces again.
    if (c.tp > 1) tp_volume += 2 * (t - 1) / t * (w.tp_forward * (checkpointed && !c.checkpoint.sac ? 2 : 1) + w.tp_backward);
    if (!checkpointed) continue;
    // torchtitan's policy keeps the attention outputs and every other matrix product.
    recompute += !c.checkpoint.sac ? time : w.sdpa ? 0.0 : w.mm ? time / 2 : time;
  }
  const double k = static_cast<double>(c.accumulate);
  StepTime st;
  st.compute_s = k * 3 * forward;
  st.recompute_s = k * recompute;
  // Collectives: ring all-gather / reduce-scatter move (W-1)/W of the tensor per rank; an
  // all-reduce is both. A group inside a node uses its links, a larger one the network.
  const auto bandwidth = [&](double ranks) { return (ranks <= perf_.node_gpus ? perf_.link_gbps : perf_.net_gbps) * 1e9; };
  const double w = c.world, f = (w - 1) / w;
  const double bw = bandwidth(w * t);
  const double p = static_cast<double>(param_elems_) / t;  // a rank's part of every parameter (tp: at least)
  const double grads = p * static_cast<double>(ComputeBytes(c));
  const double gathered = p * static_cast<double>(ComputeBytes(c) == 2 ? 2 : RestingBytes(c));
  double volume = 0;
  switch (c.sharding) {
    case Sharding::kDdp: volume = c.world > 1 ? 2 * f * grads : 0; break;
    case Sharding::kZero1: volume = 2 * f * grads; break;
    case Sharding::kZero2: volume = k * f * grads + f * gathered; break;
    case Sharding::kZero3: case Sharding::kZero3Offload: case Sharding::kFsdp: case Sharding::kFsdpOffload:
    case Sharding::kFsdp2:
      volume = k * (2 * f * gathered + f * grads);
      break;
    case Sharding::kFsdpGradOp: case Sharding::kFsdp2NoReshard: volume = k * (f * gathered + f * grads); break;
    case Sharding::kHsdp: break;  // below: two groups
  }
  st.comm_s = volume / bw;
  if (c.sharding == Sharding::kHsdp) {
    // FSDP2 within a replica of S ranks, then the reduce-scatter's output (a 1/S shard of the
    // grads) all-reduced over the 2 replicas (foreach_reduce's all_reduce_group), per micro-batch.
    const double s = w / 2, fs = (s - 1) / s;
    st.comm_s = k * (2 * fs * gathered + fs * grads) / bandwidth(s * t) + k * (2 * 0.5 * grads / s) / bandwidth(w * t);
  }
  st.tp_comm_s = k * tp_volume / bandwidth(t);
  st.comm_s += st.tp_comm_s;
  // The optimizer step: read the parameter and grad, read and write the parameter and states.
  const double local = ShardsStates(c.sharding) ? p / static_cast<double>(ShardRanks(c)) : p;
  const double step_bytes = local * static_cast<double>(2 * RestingBytes(c) + ComputeBytes(c) + 2 * states_ * RestingBytes(c));
  const double host = perf_.host_gbps * 1e9;
  if (OffloadsStates(c.sharding)) {
    // Grads to the host and parameters back (FSDP CPUOffload: the shards up for forward and
    // backward of every micro-batch), and the step on the host (charged at the PCIe rate).
    const double shard = p / w * static_cast<double>(RestingBytes(c));
    const double traffic = local * static_cast<double>(ComputeBytes(c)) +
                           (c.sharding == Sharding::kFsdpOffload ? 2 * k * shard : shard);
    st.offload_s = (traffic + step_bytes) / host;
  } else {
    st.optimizer_s = step_bytes / hbm;
  }
  return st;
}

}  // namespace memsim
