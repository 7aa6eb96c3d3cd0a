// The planner's cost model (Note [Planner cost model] in docs/plan.md): an estimated step time
// of a candidate — per-op FLOPs and bytes on the GPU's roofline, the recomputation of
// checkpointed blocks, the collectives of its sharding on the interconnect, the offload traffic
// over PCIe, the optimizer step — from the GPU rates of sim/data/gpu_perf.json. It ranks plans;
// it does not claim wall-clock accuracy. Also the proven lower bounds of a candidate's peak
// memory the search prunes with (Note [Planner bounds]).
#ifndef MEMSIM_SIM_PLAN_COST_H_
#define MEMSIM_SIM_PLAN_COST_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lib/ir/dtype.h"
#include "lib/ir/graph.h"
#include "lib/util/status.h"
#include "sim/plan/space.h"

namespace memsim {

/// One row of sim/data/gpu_perf.json (rates in 10^12 FLOP/s and 10^9 B/s).
struct GpuPerf {
  std::string gpu;
  double fp32_tflops = 0, fp16_tflops = 0, bf16_tflops = 0;
  double hbm_gbps = 0;   ///< device memory bandwidth
  double link_gbps = 0;  ///< GPU to GPU inside a node, per direction
  int node_gpus = 8;     ///< GPUs one node's links join
  double net_gbps = 0;   ///< between nodes, per GPU
  double host_gbps = 0;  ///< PCIe to host memory, per direction
  std::string source;

  double PeakFlops(Dtype d) const;  ///< FLOP/s of matrix products in |d|
};
const std::vector<GpuPerf>& GpuPerfTable();
/// The row of catalog GPU |name| (case-insensitive), or nullopt.
std::optional<GpuPerf> FindGpuPerf(std::string_view name);

/// A step's estimated time, per term (seconds, per rank: the ranks run in parallel).
struct StepTime {
  double compute_s = 0;    ///< forward + backward of every micro-batch (backward = 2 x forward)
  double recompute_s = 0;  ///< the checkpointed blocks' forward again
  double comm_s = 0;       ///< the sharding's collectives, not overlapped
  double offload_s = 0;    ///< host <-> device copies and the host optimizer
  double optimizer_s = 0;  ///< the optimizer step on the device
  double bubble_s = 0;     ///< pipeline bubble (no pipeline schedules yet: 0)
  double tp_comm_s = 0;    ///< of comm_s: the tensor-parallel all-reduces
  double total() const { return compute_s + recompute_s + comm_s + offload_s + optimizer_s + bubble_s; }
};

/// The forward work of one op (the graph bound at one micro-batch, in one precision).
struct OpWork {
  double flops = 0;    ///< multiply-adds x 2 of the matrix products (linear, matmul, conv, attention)
  double bytes = 0;    ///< bytes read and written (inputs + outputs that own storage)
  Dtype dtype = Dtype::kFloat32;  ///< the op's output dtype (autocast's choice under --amp)
  bool mm = false;     ///< a matrix product torchtitan's SAC policy saves every other of
  bool sdpa = false;   ///< fused attention (SAC saves its outputs)
  int block = -1;      ///< the repeated block it runs in (index into PlanModel::blocks), or -1
  int64_t live = 0;    ///< bytes of the distinct non-parameter storages its inputs and outputs hold
  /// A linear on a trainable weight: its backward needs its activation input (grad of the
  /// weight = grad_out^T x), saved from the forward until then. |saved_key|: the storage (or,
  /// under autocast, the tensor whose cast copy is saved); |saved| its bytes as saved.
  TensorId saved_key = kNone;
  int64_t saved = 0;
  /// Tensor parallel (--tp-plan layers): a RowwiseParallel Linear all-reduces its output in
  /// forward (|tp_forward|: its bytes), a ColwiseParallel one its input's grad in backward
  /// (|tp_backward|: the input's bytes).
  double tp_forward = 0, tp_backward = 0;
};

/// Times and bounds of the candidates of one request. Not thread-safe (it caches one binding
/// per precision and micro-batch).
class CostModel {
 public:
  CostModel(const Graph& g, const PlanRequest& r, const PlanModel& m, const GpuPerf& perf);
  /// The estimated step time of |c|. Error: the graph does not bind at |c|'s micro-batch.
  Result<StepTime> TimeOf(const PlanCandidate& c);
  /// A lower bound of |c|'s peak live bytes (Note [Planner bounds]): the larger of the
  /// parameter-state floor and the largest op's live bytes over the resident parameters.
  Result<int64_t> MemoryFloor(const PlanCandidate& c);
  int64_t parameter_elements() const { return param_elems_; }

 private:
  /// The ops' work bound at |micro_batch| in precision |p| (FSDP's bf16 mixed precision binds as
  /// --dtype bf16: both compute in bf16).
  Result<const std::vector<OpWork>*> Work(Precision p, int64_t micro_batch);
  static int64_t SavedBytes(const std::vector<OpWork>& work, const Checkpointing& ck);
  int64_t ParamBytesLocal(const PlanCandidate& c) const;
  int64_t StateBytesLocal(const PlanCandidate& c) const;

  const Graph& g_;
  PlanRequest r_;
  PlanModel m_;
  GpuPerf perf_;
  int64_t param_elems_ = 0;
  int states_ = 2;            ///< parameter-sized optimizer states (Adam: 2)
  bool state_floor_ = true;   ///< false: states of a size the floor does not know (8-bit)
  std::map<std::pair<int, int64_t>, std::vector<OpWork>> work_;
};

}  // namespace memsim

#endif  // MEMSIM_SIM_PLAN_COST_H_
